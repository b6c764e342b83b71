import { createInterface } from 'node:readline';
import type { ResultPromise } from 'execa';
import { PLAIN, type Paint } from '../color.js';
import type { UpProgress, LogRecord } from './up-progress.js';

/** A daemon `llorch up` started (execa, output piped, its own process group). */
export type Child = ResultPromise<{
  reject: false;
  stdout: 'pipe';
  stderr: 'pipe';
  cleanup: true;
  detached: true;
  forceKillAfterDelay: number;
  env: Record<string, string | undefined>;
}>;

/** What `llorch up` prints when asked to stop. */
export const STOPPING_LINE = 'stopping… (Ctrl-C again to force)';

/** Turns one JSON log line of a daemon into a short human line (or nothing for noise). */
export function humanLogLine(name: string, line: string, paint: Paint = PLAIN): string | undefined {
  const rec = parseRecord(line);
  if (rec === undefined) return line.trim() ? `[${name}] ${line}` : undefined;
  return humanRecord(name, rec, paint);
}

function parseRecord(line: string): LogRecord | undefined {
  try {
    const rec: unknown = JSON.parse(line);
    return typeof rec === 'object' && rec !== null && !Array.isArray(rec) ? (rec as LogRecord) : undefined;
  } catch {
    return undefined;
  }
}

function humanRecord(name: string, rec: LogRecord, paint: Paint): string | undefined {
  const level = typeof rec.level === 'number' ? rec.level : 30;
  if (level < 30) return undefined;
  // per-request access lines (status polls, heartbeats) drown out what matters at start-up
  if (level < 40 && (rec.msg === 'incoming request' || rec.msg === 'request completed')) return undefined;
  const text = typeof rec.human === 'string' ? rec.human : String(rec.msg ?? '');
  const facts = ['pool_id', 'percent', 'bytes_done', 'bytes_total', 'url', 'state', 'err']
    .filter((k) => rec[k] !== undefined)
    .map(
      (k) =>
        `${k}=${typeof rec[k] === 'object' ? JSON.stringify((rec[k] as { message?: unknown }).message ?? rec[k]) : String(rec[k])}`,
    );
  const tag = level >= 50 ? `${paint.red('ERROR')} ` : level >= 40 ? `${paint.yellow('WARN')} ` : '';
  return `[${name}] ${tag}${text}${facts.length ? `  (${facts.join(' ')})` : ''}`;
}

/** The base URL in orchestratord's `{"msg":"listening","url":…}` log line; undefined for any other line. */
export function listeningUrl(line: string): string | undefined {
  if (!line.includes('"listening"')) return undefined;
  try {
    const rec = JSON.parse(line) as Record<string, unknown>;
    return rec.msg === 'listening' && typeof rec.url === 'string' ? rec.url : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The dashboard's address for orchestratord listening at `url`: its root (`GET /` serves the
 * page). A wildcard bind (0.0.0.0, ::) is shown as localhost, an address a browser can open.
 */
export function dashboardUrl(url: string): string {
  const u = new URL('/', url);
  if (u.hostname === '0.0.0.0' || u.hostname === '[::]') u.hostname = 'localhost';
  return u.href;
}

/**
 * Forwards a child's output as human lines; on a terminal, progress records move the live bars
 * instead. `onLine` sees every raw line, after its human form (if any) was written.
 */
export function relay(
  name: string,
  child: Child,
  print: (text: string) => void,
  paint: Paint,
  live: UpProgress | undefined,
  onLine?: (line: string) => void,
): void {
  for (const stream of [child.stdout, child.stderr]) {
    if (!stream) continue;
    createInterface({ input: stream }).on('line', (line) => {
      const rec = parseRecord(line);
      if (rec === undefined || live?.take(rec) !== true) {
        const text =
          rec === undefined ? (line.trim() ? `[${name}] ${line}` : undefined) : humanRecord(name, rec, paint);
        if (text !== undefined) print(text);
      }
      onLine?.(line);
    });
  }
}
