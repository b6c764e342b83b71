import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { ClusterPoolListSchema, type ClusterPool } from '@llama-orch/contracts';
import { execa, type ResultPromise } from 'execa';
import { callJson, type Target } from '../http.js';
import { CliError } from '../errors.js';
import { PLAIN, type Paint } from '../color.js';
import { detectPdeathsigPrefix } from '../pdeathsig.js';
import { UpProgress, type LogRecord } from './up-progress.js';

export interface UpOptions {
  repoRoot: string;
  /** pool-managerd YAML config. */
  config: string;
  /** orchestratord listen address. */
  addr: string;
  token: string | undefined;
  /** Shared engine/model cache (the same one the tests use, so one build serves both). */
  cacheDir: string;
  out: NodeJS.WritableStream;
  /** Ctrl-C: the daemons are asked to stop (SIGTERM) and finish their orderly shutdown. */
  signal: AbortSignal;
  /** A second Ctrl-C: the daemons are killed (SIGKILL; their engines die with them). */
  force?: AbortSignal;
  /** A terminal for live progress lines (one per long step); without it progress comes as log lines. */
  progressTty?: NodeJS.WritableStream;
  /** Give up waiting for a ready pool after this long (first run includes the engine build). */
  readyTimeoutMs: number;
  /** Colours for ERROR/WARN tags of the daemons' lines. @default no colour */
  paint?: Paint;
}

type Child = ResultPromise<{ reject: false; stdout: 'pipe'; stderr: 'pipe'; cleanup: true; detached: true; forceKillAfterDelay: number; env: Record<string, string | undefined> }>;

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
    .map((k) => `${k}=${typeof rec[k] === 'object' ? JSON.stringify((rec[k] as { message?: unknown }).message ?? rec[k]) : String(rec[k])}`);
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
function relay(name: string, child: Child, print: (text: string) => void, paint: Paint, live: UpProgress | undefined, onLine?: (line: string) => void): void {
  for (const stream of [child.stdout, child.stderr]) {
    if (!stream) continue;
    createInterface({ input: stream }).on('line', (line) => {
      const rec = parseRecord(line);
      if (rec === undefined || live?.take(rec) !== true) {
        const text = rec === undefined ? (line.trim() ? `[${name}] ${line}` : undefined) : humanRecord(name, rec, paint);
        if (text !== undefined) print(text);
      }
      onLine?.(line);
    });
  }
}

/**
 * `llorch up`: orchestratord + one pool-managerd as two child processes. Returns when both exit;
 * aborting `signal` (Ctrl-C) prints {@link STOPPING_LINE} and stops them with one SIGTERM each
 * (their orderly shutdown: pool-managerd first, so that it deregisters, then orchestratord), escalating to SIGKILL after 20 s or at once when
 * `force` aborts (a second Ctrl-C). They run in their own process group, so the terminal's Ctrl-C
 * reaches only this process, and each daemon gets exactly one signal. Both are started through `setpriv --pdeathsig SIGTERM` where it works, so they also stop when this
 * process dies without a chance to clean up (SIGKILL, OOM kill, a closed terminal); engines die
 * with their pool-managerd (it spawns them with a parent-death signal too).
 */
export async function up(opts: UpOptions): Promise<void> {
  const orchMain = join(opts.repoRoot, 'apps', 'orchestratord', 'dist', 'main.js');
  const poolMain = join(opts.repoRoot, 'apps', 'pool-managerd', 'dist', 'main.js');
  for (const f of [orchMain, poolMain]) {
    if (!existsSync(f)) throw new CliError(`${f} is missing: run \`pnpm build\` (scripts/dev.sh up does it for you)`);
  }
  const env = { ...process.env, LLORCH_CACHE_DIR: opts.cacheDir, ...(opts.token ? { LLORCH_API_TOKEN: opts.token } : {}) };
  // past pool-managerd's own 15 s grace: its orderly shutdown decides, SIGKILL is the backstop
  const common = { reject: false, stdout: 'pipe', stderr: 'pipe', cleanup: true, detached: true, forceKillAfterDelay: 20_000 } as const;
  const target: Target = { url: `http://${opts.addr}`, token: opts.token };

  const paint = opts.paint ?? PLAIN;
  const live = opts.progressTty === undefined ? undefined : new UpProgress(opts.progressTty);
  const print = (text: string): void => {
    if (live === undefined) opts.out.write(`${text}\n`);
    else live.log(text);
  };
  const prefix = await detectPdeathsigPrefix('SIGTERM');
  if (prefix === undefined) opts.out.write(`${paint.yellow('WARN')} setpriv --pdeathsig is unavailable: if llorch is killed (SIGKILL), the daemons keep running\n`);
  const [bin, ...lead] = prefix === undefined ? [process.execPath] : [...prefix, process.execPath];
  const daemon = (args: string[], childEnv: Record<string, string | undefined>): Child => execa(bin!, [...lead, ...args], { ...common, env: childEnv }) as Child;

  opts.out.write(`starting orchestratord on ${target.url}\n`);
  const orch = daemon([orchMain], { ...env, ORCHD_ADDR: opts.addr });
  // the page is there as soon as orchestratord listens, long before the first pool is ready (a
  // first run builds llama-server for minutes): say where it is right away
  let dashboard = dashboardUrl(target.url);
  let announceListening: (() => void) | undefined;
  const listening = new Promise<void>((resolve) => {
    announceListening = resolve;
  });
  relay('orchestratord', orch, print, paint, live, (line) => {
    const url = listeningUrl(line);
    if (url === undefined || announceListening === undefined) return;
    announceListening();
    announceListening = undefined;
    dashboard = dashboardUrl(url);
    print(`dashboard: ${dashboard}`);
  });
  // pool-managerd registers at once: started before orchestratord listens, its first attempts
  // would fail (and warn) for no reason
  const aborted = new Promise<void>((resolve) => opts.signal.addEventListener('abort', () => resolve(), { once: true }));
  if (!(await Promise.race([listening.then(() => true), orch.then(() => false), aborted.then(() => false)]))) {
    if (orch.exitCode === null) orch.kill('SIGTERM');
    await orch;
    if (opts.signal.aborted) return;
    throw new CliError('orchestratord exited before it listened (see its log above)');
  }
  opts.out.write(`starting pool-managerd with ${opts.config} (first run builds llama-server from source: ~5 min on 2 cores)\n`);
  const pool = daemon([poolMain, '--config', opts.config], env);
  relay('pool-managerd', pool, print, paint, live);

  const children = [orch, pool];
  let stopping = false;
  // pool-managerd first: it deregisters its node from orchestratord while that still listens
  const stop = (): void => {
    if (stopping) return;
    stopping = true;
    live?.stop();
    // on a terminal the echoed ^C has no line end of its own
    if (opts.signal.aborted) opts.out.write(`${opts.progressTty !== undefined ? '\n' : ''}${STOPPING_LINE}\n`);
    if (pool.exitCode === null) pool.kill('SIGTERM');
    void pool.then(() => {
      if (orch.exitCode === null) orch.kill('SIGTERM');
    });
  };
  const kill = (): void => {
    for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
  };
  opts.signal.addEventListener('abort', stop, { once: true });
  opts.force?.addEventListener('abort', kill, { once: true });
  const exited = Promise.race(children.map((c) => c.then((r) => r)));

  try {
    const ready = await Promise.race([waitReady(target, opts.readyTimeoutMs, opts.signal), exited.then(() => undefined)]);
    if (ready) {
      live?.stop();
      const cli = join('packages', 'cli', 'dist', 'main.js');
      opts.out.write(
        [
          '',
          'llama-orch is up',
          `  orchestratord  ${target.url}`,
          `  dashboard      ${dashboard}`,
          ...ready.map(
            (p) =>
              `  pool ${p.pool_id} on node ${p.node_id}: ready, ${p.slots_total} slot(s), model ${p.models.join(', ')}${p.aliases?.length ? ` (clients may say ${p.aliases.join(', ')})` : ''}`,
          ),
          '  (synthetic:llama produces noise text from a real engine; configure an hf: model for real text)',
          '',
          `Try:  node ${cli} submit "Write a haiku about GPUs"`,
          `      node ${cli} status`,
          'Ctrl-C stops everything.',
          '',
        ].join('\n'),
      );
    } else if (!opts.signal.aborted) {
      stop();
      throw new CliError('a daemon exited before the cluster became ready (see its log above)');
    }
    await Promise.all(children);
  } finally {
    opts.signal.removeEventListener('abort', stop);
    stop();
    await Promise.allSettled(children);
    opts.force?.removeEventListener('abort', kill);
  }
}

async function waitReady(target: Target, timeoutMs: number, signal: AbortSignal): Promise<ClusterPool[] | undefined> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline && !signal.aborted) {
    const pools = await callJson(target, 'GET', '/v2/pools', ClusterPoolListSchema).then(
      (r) => r.pools,
      () => [],
    );
    const ready = pools.filter((p) => p.ready);
    if (ready.length > 0 && ready.length === pools.length) return ready;
    await sleep(500, undefined, { signal }).catch(() => undefined);
  }
  if (!signal.aborted) throw new CliError(`no ready pool after ${Math.round(timeoutMs / 1000)} s`);
  return undefined;
}
