import { spawn } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import { freeLoopbackPort } from '@llama-orch/daemon-support';
import type { JsonLine } from '@llama-orch/daemon-support/daemon-launcher';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { request } from 'undici';
import { BenchError, ClusterNotReadyError } from '../errors.js';
import {
  COLD_START_TIMEOUT_MS,
  newToken,
  poolStatus,
  startPoolManagerd,
  type PoolManagerdHandle,
} from '../lib/cluster.js';
import { profFlags, type Bench, type BenchContext } from '../lib/context.js';
import type { BenchOutcome } from '../lib/result.js';
import { rounded, summarize } from '../lib/stats.js';

const POOL = 'start';

interface PoolSample {
  /** pool-managerd spawn → `pool ready` log line (ms, wall clock; pino times are ms). */
  totalMs: number;
  /** Phases from pool-managerd's own log lines, ms from spawn. */
  listening: number;
  engineSpawned: number;
  engineHealthy: number;
  ready: number;
  argv: string[];
  /** How pool-managerd loaded its code (`startup` of its `listening` line), e.g. `bundle/hit`. */
  startup: string;
}

function logTime(lines: readonly JsonLine[], msg: string): number {
  const l = lines.find((x) => x.msg === msg && typeof x.time === 'number');
  return l === undefined ? Number.NaN : (l.time as number);
}

async function poolManagerdSample(ctx: BenchContext, i: number, token: string): Promise<PoolSample> {
  let pm: PoolManagerdHandle | undefined;
  try {
    pm = await startPoolManagerd({
      paths: ctx.paths,
      dir: ctx.dir,
      nodeId: `start-${i}`,
      token,
      pools: [{ id: POOL, slots: 1, determinism: true, threads: 1 }],
      nodeFlags: profFlags(ctx, `pool-start-${i}`),
      timeoutMs: COLD_START_TIMEOUT_MS,
    });
    const deadline = performance.now() + COLD_START_TIMEOUT_MS;
    for (;;) {
      if (pm.daemon.state === 'exited') throw new ClusterNotReadyError(`pool-managerd exited:\n${pm.daemon.tail()}`);
      if (pm.daemon.logs().some((l) => l.msg === 'pool ready')) break;
      if (performance.now() > deadline) throw new ClusterNotReadyError('pool not ready');
      await sleep(20);
    }
    const status = await poolStatus(pm, POOL, token);
    if (status?.ready !== true)
      throw new BenchError(`pool logged ready but GET /v2/pools/${POOL} says ${JSON.stringify(status)}`);
    const handoffDir = join(pm.runtimeDir, 'engines');
    const file = (await readdir(handoffDir)).find((f) => f.endsWith('.json'));
    if (file === undefined) throw new BenchError('no handoff file');
    const handoff = JSON.parse(await readFile(join(handoffDir, file), 'utf8')) as { pid: number };
    const argv = (await readFile(`/proc/${handoff.pid}/cmdline`, 'utf8')).split('\0').filter((a) => a !== '');
    const lines = pm.daemon.logs();
    const t0 = pm.daemon.spawnedAtWall;
    const startup = lines.find((l) => l.msg === 'listening')?.startup as
      { code?: unknown; code_cache?: unknown } | undefined;
    const ready = logTime(lines, 'pool ready') - t0;
    return {
      totalMs: ready,
      listening: logTime(lines, 'listening') - t0,
      engineSpawned: logTime(lines, 'engine spawned') - t0,
      engineHealthy: logTime(lines, 'engine healthy') - t0,
      ready,
      argv,
      startup: `${String(startup?.code ?? 'unknown')}/${String(startup?.code_cache ?? 'unknown')}`,
    };
  } finally {
    await pm?.daemon.stop();
  }
}

/** The same llama-server binary and flags, spawned directly: spawn → first /health 200 (polled every 2 ms). */
async function engineSample(ctx: BenchContext, argv: readonly string[], i: number): Promise<number> {
  const [binary, ...flags] = argv;
  if (binary === undefined) throw new BenchError('empty engine argv');
  const port = await freeLoopbackPort();
  const portIdx = flags.indexOf('--port');
  if (portIdx < 0) throw new BenchError(`engine flags have no --port: ${flags.join(' ')}`);
  const args = [...flags];
  args[portIdx + 1] = String(port);
  const fd = openSync(join(ctx.dir, `engine-${i}.log`), 'a');
  const t0 = performance.now();
  const child = spawn(binary, args, { env: { PATH: process.env.PATH ?? '/usr/bin:/bin' }, stdio: ['ignore', fd, fd] });
  closeSync(fd);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  try {
    const deadline = t0 + 60_000;
    while (performance.now() < deadline) {
      const ok = await request(`http://127.0.0.1:${port}/health`, { method: 'GET', reset: true }).then(
        async (r) => {
          await r.body.dump();
          return r.statusCode === 200;
        },
        () => false,
      );
      if (ok) return performance.now() - t0;
      if (child.exitCode !== null) throw new BenchError(`engine exited with ${child.exitCode}`);
      await sleep(2);
    }
    throw new BenchError('engine not healthy within 60 s');
  } finally {
    child.kill('SIGTERM');
    await exited;
  }
}

function countBy(values: readonly string[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const v of values) out[v] = (out[v] ?? 0) + 1;
  return out;
}

export const poolStartBench: Bench = {
  name: 'pool-start',
  title: 'Pool start (cached engine and model)',
  targets: [{ figure: 'added_p50', op: '<=', value: 200, unit: 'ms' }],
  async run(ctx: BenchContext): Promise<BenchOutcome> {
    const token = newToken();
    ctx.log('pool-start: first start (may build llama-server on a cold cache; not counted)');
    const first = await poolManagerdSample(ctx, 0, token);
    const pairs = ctx.quick ? 3 : 10;
    const pool: PoolSample[] = [];
    const engine: number[] = [];
    ctx.log(`pool-start: ${pairs} interleaved pairs (pool-managerd start, engine alone)`);
    for (let i = 1; i <= pairs; i++) {
      for (const v of i % 2 === 0 ? ['pool', 'engine'] : ['engine', 'pool']) {
        if (v === 'pool') pool.push(await poolManagerdSample(ctx, i, token));
        else engine.push(await engineSample(ctx, first.argv, i));
        await sleep(200);
      }
    }
    const notBundled = pool.filter((s) => !s.startup.startsWith('bundle/')).length;
    if (notBundled > 0) {
      ctx.log(
        `pool-start: ${notBundled} of ${pool.length} starts ran pool-managerd from the tsc output, not its bundle (missing or stale: pnpm --filter @llama-orch/pool-managerd build)`,
      );
    }
    const p = summarize(pool.map((s) => s.totalMs));
    const e = summarize(engine);
    const phase = (f: (s: PoolSample) => number): ReturnType<typeof rounded> => rounded(summarize(pool.map(f)), 1);
    return {
      method:
        `${pairs} interleaved pairs after one uncounted start. Pool = spawn \`node apps/pool-managerd/dist/main.js --config\` ` +
        `(standalone, one pool: synthetic model, 1 slot; engine and model already cached) → its \`pool ready\` log line ` +
        '(pino time, ms; the pool is then ready on GET /v2/pools/{id}): Node start-up, config, provisioning cache checks, ' +
        'engine spawn, readiness polling, /props and the handoff file all count. Engine = spawn the same llama-server ' +
        "binary with the same flags (read from /proc/<pid>/cmdline of the pool's engine, --port replaced) → first " +
        'GET /health 200, polled every 2 ms. Added = median(pool) − median(engine). dist/main.js runs the package bundle with ' +
        'its V8 code cache when the package build made a current one (a missing cache is written when a run exits, e.g. the ' +
        'uncounted start), else the tsc output module by module: details.startup_counted says which ran, details.first_start ' +
        'what the uncounted start took.',
      samples: { pairs },
      figures: {
        pool_p50: { label: 'pool-managerd spawn → pool ready, p50', value: p.p50, unit: 'ms' },
        engine_p50: { label: 'engine alone spawn → /health 200, p50', value: e.p50, unit: 'ms' },
        added_p50: { label: 'added by pool-managerd, p50', value: p.p50 - e.p50, unit: 'ms' },
        added_max: { label: 'added by pool-managerd, max − max', value: p.max - e.max, unit: 'ms' },
        daemon_added_p50: {
          label: 'of which after the daemon is up (listening → pool ready) − engine alone, p50',
          value: summarize(pool.map((s) => s.ready - s.listening)).p50 - e.p50,
          unit: 'ms',
        },
      },
      details: {
        pool_ms: rounded(p, 1),
        engine_ms: rounded(e, 1),
        phases_ms_from_spawn: {
          listening: phase((s) => s.listening),
          engine_spawned: phase((s) => s.engineSpawned),
          engine_healthy: phase((s) => s.engineHealthy),
          pool_ready: phase((s) => s.ready),
        },
        engine_argv: first.argv,
        // The uncounted first start may also build the engine or write the daemon's code cache.
        first_start: { pool_ready_ms: first.totalMs, startup: first.startup },
        startup_counted: countBy(pool.map((s) => s.startup)),
      },
    };
  },
};
