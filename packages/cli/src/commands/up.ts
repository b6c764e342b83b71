import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { ClusterPoolListSchema } from '@llama-orch/contracts';
import { execa, type ResultPromise } from 'execa';
import { callJson, type Target } from '../http.js';
import { CliError } from '../errors.js';
import { PLAIN, type Paint } from '../color.js';
import { detectPdeathsigPrefix } from '../pdeathsig.js';

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
  signal: AbortSignal;
  /** Give up waiting for a ready pool after this long (first run includes the engine build). */
  readyTimeoutMs: number;
  /** Colours for ERROR/WARN tags of the daemons' lines. @default no colour */
  paint?: Paint;
}

type Child = ResultPromise<{ reject: false; stdout: 'pipe'; stderr: 'pipe'; cleanup: true; forceKillAfterDelay: number; env: Record<string, string | undefined> }>;

/** Turns one JSON log line of a daemon into a short human line (or nothing for noise). */
export function humanLogLine(name: string, line: string, paint: Paint = PLAIN): string | undefined {
  let rec: Record<string, unknown>;
  try {
    rec = JSON.parse(line) as Record<string, unknown>;
  } catch {
    return line.trim() ? `[${name}] ${line}` : undefined;
  }
  const level = typeof rec.level === 'number' ? rec.level : 30;
  if (level < 30) return undefined;
  // per-request access lines (status polls, heartbeats) drown out what matters at start-up
  if (level < 40 && (rec.msg === 'incoming request' || rec.msg === 'request completed')) return undefined;
  const text = typeof rec.human === 'string' ? rec.human : String(rec.msg ?? '');
  const facts = ['pool_id', 'poolId', 'percent', 'pct', 'bytes_done', 'bytes_total', 'url', 'state', 'err']
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
 * Forwards a child's output as human lines; collapses repeated progress lines to one every 2 s.
 * `onLine` sees every raw line, after its human form (if any) was written.
 */
function relay(name: string, child: Child, out: NodeJS.WritableStream, paint: Paint, onLine?: (line: string) => void): void {
  let lastProgressAt = 0;
  for (const stream of [child.stdout, child.stderr]) {
    if (!stream) continue;
    createInterface({ input: stream }).on('line', (line) => {
      const text = humanLogLine(name, line, paint);
      const throttled = text !== undefined && /progress/i.test(text) && Date.now() - lastProgressAt < 2000;
      if (text !== undefined && !throttled) {
        if (/progress/i.test(text)) lastProgressAt = Date.now();
        out.write(`${text}\n`);
      }
      onLine?.(line);
    });
  }
}

/**
 * `llorch up`: orchestratord + one pool-managerd as two child processes. Returns when both exit;
 * aborting `signal` (Ctrl-C) stops them with SIGTERM, escalating to SIGKILL after 10 s. Both are
 * started through `setpriv --pdeathsig SIGTERM` where it works, so they also stop when this
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
  const common = { reject: false, stdout: 'pipe', stderr: 'pipe', cleanup: true, forceKillAfterDelay: 10_000 } as const;
  const target: Target = { url: `http://${opts.addr}`, token: opts.token };

  const paint = opts.paint ?? PLAIN;
  const prefix = await detectPdeathsigPrefix('SIGTERM');
  if (prefix === undefined) opts.out.write(`${paint.yellow('WARN')} setpriv --pdeathsig is unavailable: if llorch is killed (SIGKILL), the daemons keep running\n`);
  const [bin, ...lead] = prefix === undefined ? [process.execPath] : [...prefix, process.execPath];
  const daemon = (args: string[], childEnv: Record<string, string | undefined>): Child =>
    execa(bin!, [...lead, ...args], { ...common, env: childEnv }) as Child;

  opts.out.write(`starting orchestratord on ${target.url}\n`);
  const orch = daemon([orchMain], { ...env, ORCHD_ADDR: opts.addr });
  // the page is there as soon as orchestratord listens, long before the first pool is ready (a
  // first run builds llama-server for minutes): say where it is right away
  let dashboard = dashboardUrl(target.url);
  let dashboardAnnounced = false;
  relay('orchestratord', orch, opts.out, paint, (line) => {
    const url = listeningUrl(line);
    if (url === undefined || dashboardAnnounced) return;
    dashboardAnnounced = true;
    dashboard = dashboardUrl(url);
    opts.out.write(`dashboard: ${dashboard}\n`);
  });
  opts.out.write(`starting pool-managerd with ${opts.config} (first run builds llama-server from source: ~5 min on 2 cores)\n`);
  const pool = daemon([poolMain, '--config', opts.config], env);
  relay('pool-managerd', pool, opts.out, paint);

  const children = [orch, pool];
  const stop = (): void => {
    for (const c of children) if (c.exitCode === null) c.kill('SIGTERM');
  };
  opts.signal.addEventListener('abort', stop, { once: true });
  const exited = Promise.race(children.map((c) => c.then((r) => r)));

  try {
    const ready = await Promise.race([waitReady(target, opts.readyTimeoutMs, opts.signal), exited.then(() => undefined)]);
    if (ready) {
      const cli = join('packages', 'cli', 'dist', 'main.js');
      opts.out.write(
        [
          '',
          'llama-orch is up',
          `  orchestratord  ${target.url}`,
          `  dashboard      ${dashboard}`,
          ...ready.map((p) => `  pool ${p.pool_id} on node ${p.node_id}: ready, ${p.slots_total} slot(s), model ${p.models.join(', ')}`),
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
  }
}

async function waitReady(target: Target, timeoutMs: number, signal: AbortSignal): Promise<Array<{ pool_id: string; node_id: string; slots_total: number; models: string[] }> | undefined> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline && !signal.aborted) {
    const pools = await callJson(target, 'GET', '/v2/pools', ClusterPoolListSchema).then((r) => r.pools, () => []);
    const ready = pools.filter((p) => p.ready);
    if (ready.length > 0 && ready.length === pools.length) return ready;
    await sleep(500, undefined, { signal }).catch(() => undefined);
  }
  if (!signal.aborted) throw new CliError(`no ready pool after ${Math.round(timeoutMs / 1000)} s`);
  return undefined;
}
