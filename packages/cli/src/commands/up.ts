import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { execa } from 'execa';
import type { Target } from '../http.js';
import { CliError } from '../errors.js';
import { PLAIN, type Paint } from '../color.js';
import { detectPdeathsigPrefix } from '../pdeathsig.js';
import { UpProgress } from './up-progress.js';
import { STOPPING_LINE, dashboardUrl, listeningUrl, relay, type Child } from './up-output.js';
import { upSummary, waitReady } from './up-ready.js';
import { nodeHeartbeatEnv } from './node-heartbeat.js';
import { catalogFileEnv } from './up-catalog.js';
import { upReplicas } from './up-replicas.js';

export { humanLogLine, listeningUrl, dashboardUrl, STOPPING_LINE } from './up-output.js';

export interface UpOptions {
  repoRoot: string;
  /** pool-managerd YAML config. */
  config: string;
  /**
   * orchestratord's catalog file (`ORCHD_CATALOG_FILE`: models registered at start, loaded on their
   * first request), given when `config` has `on_demand` and the environment names none.
   * @default none
   */
  catalogFile?: string;
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
  /**
   * orchestratord replicas sharing one redis-server behind HAProxy (up-replicas.ts); 1 = the one
   * process of today, nothing else started. @default 1
   */
  replicas?: number;
  /** Where `--replicas` keeps Redis's data and HAProxy's config. @default <repoRoot>/.cache/llorch-up */
  stateDir?: string;
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
  const env = {
    ...process.env,
    LLORCH_CACHE_DIR: opts.cacheDir,
    ...(opts.token ? { LLORCH_API_TOKEN: opts.token } : {}),
    ...nodeHeartbeatEnv(opts.config, process.env),
    ...catalogFileEnv(opts.catalogFile, opts.config, process.env),
  };
  // past pool-managerd's own 15 s grace: its orderly shutdown decides, SIGKILL is the backstop
  const common = {
    reject: false,
    stdout: 'pipe',
    stderr: 'pipe',
    cleanup: true,
    detached: true,
    forceKillAfterDelay: 20_000,
  } as const;
  const target: Target = { url: `http://${opts.addr}`, token: opts.token };

  const paint = opts.paint ?? PLAIN;
  const live = opts.progressTty === undefined ? undefined : new UpProgress(opts.progressTty);
  const print = (text: string): void => {
    if (live === undefined) opts.out.write(`${text}\n`);
    else live.log(text);
  };
  const prefix = await detectPdeathsigPrefix('SIGTERM');
  if (prefix === undefined)
    opts.out.write(
      `${paint.yellow('WARN')} setpriv --pdeathsig is unavailable: if llorch is killed (SIGKILL), the daemons keep running\n`,
    );
  const spawn = (
    program: string,
    args: string[],
    childEnv: Record<string, string | undefined>,
    killAfterMs = 20_000,
  ): Child => {
    const o = { ...common, env: childEnv, forceKillAfterDelay: killAfterMs };
    return (
      prefix === undefined ? execa(program, args, o) : execa(prefix[0]!, [...prefix.slice(1), program, ...args], o)
    ) as Child;
  };
  const daemon = (args: string[], childEnv: Record<string, string | undefined>, killAfterMs?: number): Child =>
    spawn(process.execPath, args, childEnv, killAfterMs);
  if ((opts.replicas ?? 1) > 1) return upReplicas(opts, { spawn, print, paint, live, env, orchMain, poolMain, target });

  opts.out.write(`starting orchestratord on ${target.url}\n`);
  // past orchestratord's 30 s drain grace and its ~12 s close
  const orch = daemon([orchMain], { ...env, ORCHD_ADDR: opts.addr }, 45_000);
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
  const aborted = new Promise<void>((resolve) =>
    opts.signal.addEventListener('abort', () => resolve(), { once: true }),
  );
  if (!(await Promise.race([listening.then(() => true), orch.then(() => false), aborted.then(() => false)]))) {
    if (orch.exitCode === null) orch.kill('SIGTERM');
    await orch;
    if (opts.signal.aborted) return;
    throw new CliError('orchestratord exited before it listened (see its log above)');
  }
  opts.out.write(
    `starting pool-managerd with ${opts.config} (first run builds llama-server from source: ~5 min on 2 cores)\n`,
  );
  const pool = daemon([poolMain, '--config', opts.config], env);
  relay('pool-managerd', pool, print, paint, live);

  const children = [orch, pool];
  let stopping = false;
  // ends the wait for a ready pool when a daemon exits first (it would poll until its deadline)
  const halt = new AbortController();
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
  const names = new Map<Child, string>([
    [orch, 'orchestratord'],
    [pool, 'pool-managerd'],
  ]);
  // the first daemon to exit, and how
  const exited = Promise.race(
    children.map((c) =>
      c.then((r) => ({
        name: names.get(c) ?? 'a daemon',
        how: r.signal ? `signal ${r.signal}` : `code ${r.exitCode}`,
      })),
    ),
  );

  try {
    const ready = await Promise.race([
      waitReady(target, opts.readyTimeoutMs, AbortSignal.any([halt.signal, opts.signal])),
      exited.then(() => {
        halt.abort();
        return undefined;
      }),
    ]);
    if (ready) {
      live?.stop();
      opts.out.write(upSummary([`  orchestratord  ${target.url}`, `  dashboard      ${dashboard}`], ready));
    } else if (!opts.signal.aborted) {
      stop();
      const first = await exited;
      throw new CliError(`${first.name} exited (${first.how}) before the cluster became ready (see its log above)`);
    }
    // Half of this cluster is no cluster (a pool-managerd heartbeating into a refused port, or an
    // orchestratord with no node): one daemon exiting stops the other, and llorch exits 1. Not
    // restarted: the in-process orchestratord's queue and tasks died with it, so a restart would
    // hide a loss rather than recover from it.
    const first = await exited;
    if (!stopping) {
      print(`${paint.red('ERROR')} [${first.name}] exited (${first.how}); stopping the rest`);
      stop();
      await Promise.allSettled(children);
      throw new CliError(`${first.name} exited (${first.how}; see its log above); llama-orch is stopped`);
    }
    await Promise.all(children);
  } finally {
    opts.signal.removeEventListener('abort', stop);
    stop();
    await Promise.allSettled(children);
    opts.force?.removeEventListener('abort', kill);
  }
}
