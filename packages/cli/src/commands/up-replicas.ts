import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Target } from '../http.js';
import { CliError } from '../errors.js';
import type { Paint } from '../color.js';
import type { UpProgress } from './up-progress.js';
import { findProgram } from './find-program.js';
import { haproxyConfig, writeFileAtomic } from './haproxy-config.js';
import { freeLoopbackPort } from '@llama-orch/daemon-support';
import { INSTALL_HINT, redisArgs, redisLine, waitRedis } from './redis-process.js';
import { STOPPING_LINE, dashboardUrl, relay, type Child } from './up-output.js';
import { upSummary, waitReady } from './up-ready.js';
import { REPLICA_RESTART_POLICY, RestartBudget } from './restart-budget.js';

/** What `llorch up --replicas` needs of `llorch up`'s options. */
export interface ReplicasUpOptions {
  config: string;
  /** The balancer's address: where one orchestratord would listen. */
  addr: string;
  out: NodeJS.WritableStream;
  signal: AbortSignal;
  force?: AbortSignal;
  progressTty?: NodeJS.WritableStream;
  readyTimeoutMs: number;
  replicas?: number;
  /** Redis's data and HAProxy's config go here. */
  stateDir?: string;
  repoRoot: string;
}

/** What `up` has already set up: the parent-death spawner, the output, the daemons' entry points. */
export interface UpKit {
  /** `killAfterMs`: SIGKILL this long after a stop's SIGTERM. @default 20 s */
  spawn(program: string, args: string[], env: Record<string, string | undefined>, killAfterMs?: number): Child;
  print(text: string): void;
  paint: Paint;
  live: UpProgress | undefined;
  /** Environment every daemon gets (cache dir, token). */
  env: Record<string, string | undefined>;
  orchMain: string;
  poolMain: string;
  /** The balancer, as clients reach it. */
  target: Target;
}

/** How long one start step (Redis answering, every replica ready, the balancer passing) may take. */
const STEP_TIMEOUT_MS = 30_000;

/** HAProxy's /readyz check period and the failed checks that take a replica out. */
const CHECK_INTERVAL_MS = 1000;
const CHECK_FALL = 2;
/** SIGKILL a replica this long after its SIGTERM: past its 30 s drain grace and its ~12 s close. */
const ORCHD_KILL_AFTER_MS = 45_000;

interface Replica {
  id: string;
  port: number;
}

/** One group of daemons started together and stopped together, in reverse start order. */
interface Stage {
  name: string;
  children: Child[];
}

/**
 * `llorch up --replicas N`: redis-server (loopback, AOF everysec, data in the state dir), N
 * orchestratord replicas sharing it (`ORCHD_REDIS_URL`), HAProxy on `addr` in front with health
 * checks on `/readyz`, then pool-managerd, which reaches the replicas through HAProxy. Each step
 * waits for the one before (Redis answers PING, every replica's /readyz is 200, the balancer
 * forwards /readyz). Ctrl-C stops them in reverse order, each stage with SIGTERM (SIGKILL after
 * 20 s, or at once on a second Ctrl-C): pool-managerd deregisters through the balancer, the
 * replicas close while Redis still answers. A replica that exits meanwhile (SIGTERM for a rolling
 * restart, or a crash) is reported in one line, routed around, and started again on its port
 * with its id after a backoff; one that keeps exiting, or Redis, HAProxy or pool-managerd
 * exiting, stops everything with an error.
 */
export async function upReplicas(opts: ReplicasUpOptions, kit: UpKit): Promise<void> {
  const n = opts.replicas ?? 1;
  const redisBin = findProgram('redis-server', kit.env.PATH);
  if (redisBin === undefined)
    throw new CliError(
      `--replicas needs Debian's redis-server (not found on PATH) for the shared cluster state: ${INSTALL_HINT}`,
    );
  const haproxyBin = findProgram('haproxy', kit.env.PATH, ['/usr/sbin', '/sbin']);
  if (haproxyBin === undefined)
    throw new CliError(
      `--replicas needs Debian's haproxy (not found on PATH or in /usr/sbin) as the load balancer: ${INSTALL_HINT}`,
    );
  const stateDir = opts.stateDir ?? join(opts.repoRoot, '.cache', 'llorch-up');
  const redisDir = join(stateDir, 'redis');
  // queued tasks (their prompts) land in Redis's files: this user's only
  await mkdir(stateDir, { recursive: true, mode: 0o700 });
  await mkdir(redisDir, { recursive: true, mode: 0o700 });

  const stages: Stage[] = [];
  let stopping = false;
  let failure: string | undefined;
  let announceStopped: (() => void) | undefined;
  const stopped = new Promise<void>((resolve) => (announceStopped = resolve));
  const stopAll = async (): Promise<void> => {
    for (const stage of [...stages].reverse()) {
      for (const c of stage.children) if (c.exitCode === null) c.kill('SIGTERM');
      await Promise.allSettled(stage.children);
    }
    announceStopped?.();
  };
  // ends the start steps' polling (and the wait for a ready pool) once the run stops
  const halt = new AbortController();
  const stop = (reason?: string): void => {
    if (stopping) return;
    stopping = true;
    halt.abort();
    failure ??= reason;
    kit.live?.stop();
    if (opts.signal.aborted) opts.out.write(`${opts.progressTty !== undefined ? '\n' : ''}${STOPPING_LINE}\n`);
    void stopAll();
  };
  const kill = (): void => {
    for (const stage of stages) for (const c of stage.children) if (c.exitCode === null) c.kill('SIGKILL');
  };
  const onAbort = (): void => stop();
  opts.signal.addEventListener('abort', onAbort, { once: true });
  opts.force?.addEventListener('abort', kill, { once: true });
  /** Starts a stage of one daemon; its exit before `stop` ends the run (the replicas have their own supervision). */
  const start = (name: string, child: Child): void => {
    stages.push({ name, children: [child] });
    void child.then((r) => {
      if (!stopping)
        stop(`${name} exited (${r.signal ? `signal ${r.signal}` : `code ${r.exitCode}`}; see its log above)`);
    });
  };
  /** Runs `step` unless the run stops first (a daemon died, Ctrl-C); false then. */
  const step = async <T>(what: string, run: (signal: AbortSignal) => Promise<T>): Promise<T | undefined> => {
    const ac = new AbortController();
    const timer = setTimeout(() => ac.abort(), STEP_TIMEOUT_MS);
    try {
      const r = await Promise.race([
        run(AbortSignal.any([ac.signal, halt.signal, opts.signal])),
        stopped.then(() => undefined),
      ]);
      if (r === undefined && !stopping) stop(`${what} took longer than ${STEP_TIMEOUT_MS / 1000} s`);
      return stopping ? undefined : r;
    } finally {
      clearTimeout(timer);
      ac.abort();
    }
  };

  try {
    const redisPort = await freeLoopbackPort();
    const redisUrl = `redis://127.0.0.1:${redisPort}/0`;
    // each spawn follows an await: a Ctrl-C meanwhile has stopped the stages so far, start no more
    if (stopping) return await finish();
    opts.out.write(
      `starting redis-server on 127.0.0.1:${redisPort} (append-only file fsynced every second, in ${redisDir})\n`,
    );
    const redis = kit.spawn(redisBin, redisArgs(redisPort, redisDir), {});
    relayRedis(redis, kit);
    start('redis-server', redis);
    if (
      !(await step('redis-server answering PING', (signal) =>
        waitRedis(redisPort, signal).then((ok) => ok || undefined),
      ))
    )
      return await finish();

    const replicas = await Promise.all(
      Array.from({ length: n }, async (_, i) => ({ id: `r${i + 1}`, port: await freeLoopbackPort() })),
    );
    if (stopping) return await finish();
    opts.out.write(
      `starting ${n} orchestratord replicas: ${replicas.map((r) => `${r.id} on 127.0.0.1:${r.port}`).join(', ')}\n`,
    );
    const spawnReplica = (r: Replica): Child => {
      const url = `http://127.0.0.1:${r.port}`;
      const child = kit.spawn(
        process.execPath,
        [kit.orchMain],
        {
          ...kit.env,
          ORCHD_ADDR: `127.0.0.1:${r.port}`,
          // links in responses (streams.*) name the balancer, which clients reach
          ORCHD_PUBLIC_URL: kit.target.url,
          ORCHD_REDIS_URL: redisUrl,
          ORCHD_REPLICA_ID: r.id,
          ORCHD_ADVERTISE_URL: url,
          // on SIGTERM a replica serves on until HAProxy has seen its /readyz fail (fall 2 checks, + one period)
          ORCHD_DRAIN_DELAY_MS: String(CHECK_INTERVAL_MS * (CHECK_FALL + 1)),
        },
        ORCHD_KILL_AFTER_MS,
      );
      relay(`orchestratord ${r.id}`, child, kit.print, kit.paint, kit.live);
      return child;
    };
    const orchStage: Stage = { name: 'orchestratord', children: replicas.map(spawnReplica) };
    stages.push(orchStage);
    let replicasReady = false;
    /**
     * A replica that exits before all were ready ends the run (it cannot start); after, it is
     * reported in one line and started again on its port with its id (restart-budget.ts: backoff,
     * and a replica that keeps exiting stops the cluster). A rolling restart is SIGTERM to each in turn.
     */
    const supervise = (r: Replica, i: number, budget: RestartBudget): void => {
      void orchStage.children[i]!.then(async (res) => {
        if (stopping) return;
        const how = res.signal ? `signal ${res.signal}` : `code ${res.exitCode}`;
        if (!replicasReady) return stop(`orchestratord ${r.id} exited (${how}; see its log above)`);
        const exitedAt = Date.now();
        const delay = budget.next();
        if (delay === undefined) {
          const p = REPLICA_RESTART_POLICY;
          return stop(
            `orchestratord ${r.id} exited (${how}) after ${p.maxRestarts} restarts within ${p.windowMs / 1000} s; stopping the cluster`,
          );
        }
        kit.print(
          `${kit.paint.yellow('WARN')} [orchestratord ${r.id}] exited (${how}); restarting it on 127.0.0.1:${r.port} in ${delay} ms, the balancer sends its requests to the other replicas`,
        );
        await sleep(delay, undefined, { signal: halt.signal }).catch(() => undefined);
        if (stopping) return;
        orchStage.children[i] = spawnReplica(r);
        supervise(r, i, budget);
        const child = orchStage.children[i];
        const ready = await untilReady(
          `http://127.0.0.1:${r.port}/readyz`,
          AbortSignal.any([halt.signal, AbortSignal.timeout(STEP_TIMEOUT_MS)]),
        );
        if (stopping || orchStage.children[i] !== child) return;
        if (ready) kit.print(`[orchestratord ${r.id}] restarted: ready ${Date.now() - exitedAt} ms after it exited`);
        // never ready: its exit is the next restart (or the end of the budget)
        else child?.kill('SIGKILL');
      });
    };
    replicas.forEach((r, i) => supervise(r, i, new RestartBudget()));
    const allReady = (signal: AbortSignal): Promise<true | undefined> =>
      Promise.all(replicas.map((r) => untilReady(`http://127.0.0.1:${r.port}/readyz`, signal))).then(
        (ok) => ok.every(Boolean) || undefined,
      );
    if (!(await step('every replica answering /readyz', allReady))) return await finish();
    replicasReady = true;

    const cfgPath = join(stateDir, 'haproxy.cfg');
    const deadline = Number(kit.env.ORCHD_DEFAULT_DEADLINE_MS) || 300_000;
    await writeFileAtomic(
      cfgPath,
      haproxyConfig({
        bind: opts.addr,
        replicas: replicas.map((r) => ({ id: r.id, addr: `127.0.0.1:${r.port}` })),
        idleTimeoutMs: Math.max(deadline, 300_000) + 60_000,
        checkIntervalMs: CHECK_INTERVAL_MS,
        fall: CHECK_FALL,
      }),
    );
    if (stopping) return await finish();
    opts.out.write(`starting haproxy on ${kit.target.url} (config ${cfgPath})\n`);
    const balancer = kit.spawn(haproxyBin, ['-db', '-f', cfgPath], {});
    relay('haproxy', balancer, kit.print, kit.paint, kit.live);
    start('haproxy', balancer);
    if (!(await step('haproxy forwarding /readyz', (signal) => untilReady(`${kit.target.url}/readyz`, signal))))
      return await finish();
    const dashboard = dashboardUrl(kit.target.url);
    kit.print(`dashboard: ${dashboard}`);

    if (stopping) return await finish();
    opts.out.write(
      `starting pool-managerd with ${opts.config} (first run builds llama-server from source: ~5 min on 2 cores)\n`,
    );
    const pool = kit.spawn(process.execPath, [kit.poolMain, '--config', opts.config], kit.env);
    relay('pool-managerd', pool, kit.print, kit.paint, kit.live);
    start('pool-managerd', pool);

    const ready = await Promise.race([
      waitReady(kit.target, opts.readyTimeoutMs, AbortSignal.any([halt.signal, opts.signal])),
      stopped.then(() => undefined),
    ]);
    if (ready !== undefined && !stopping) {
      kit.live?.stop();
      const lines = [
        `  balancer       ${kit.target.url} (haproxy, health checks on /readyz)`,
        ...replicas.map((r) => `  replica ${r.id.padEnd(6)} http://127.0.0.1:${r.port}`),
        `  redis          ${redisUrl} (data in ${redisDir})`,
        `  dashboard      ${dashboard}`,
      ];
      opts.out.write(upSummary(lines, ready, `llama-orch is up: ${n} orchestratord replicas behind haproxy`));
    }
    return await finish();
  } catch (err) {
    stop();
    await stopped;
    throw err;
  } finally {
    opts.signal.removeEventListener('abort', onAbort);
    opts.force?.removeEventListener('abort', kill);
  }

  /** Waits until everything started has stopped; a failure is the run's error. */
  async function finish(): Promise<void> {
    if (!stopping && stages.length === 0) return;
    await stopped;
    if (failure !== undefined) throw new CliError(failure);
  }
}

/** redis-server's lines without their pid/date head. */
function relayRedis(redis: Child, kit: UpKit): void {
  for (const stream of [redis.stdout, redis.stderr]) {
    stream?.setEncoding('utf8');
    let rest = '';
    stream?.on('data', (chunk: string) => {
      const lines = (rest + chunk).split('\n');
      rest = lines.pop() ?? '';
      for (const line of lines) if (line.trim()) kit.print(`[redis-server] ${redisLine(line)}`);
    });
  }
}

/** Polls `url` until it answers 200; undefined when `signal` aborts first. */
async function untilReady(url: string, signal: AbortSignal): Promise<true | undefined> {
  while (!signal.aborted) {
    const ok = await fetch(url, { signal: AbortSignal.any([signal, AbortSignal.timeout(1000)]) }).then(
      (r) => r.status === 200,
      () => false,
    );
    if (ok) return true;
    await sleep(100, undefined, { signal }).catch(() => undefined);
  }
  return undefined;
}
