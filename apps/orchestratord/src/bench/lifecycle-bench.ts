#!/usr/bin/env node
import { systemClock } from '@llama-orch/daemon-support';
import { Redis } from 'ioredis';
import { pino } from 'pino';
import type { SharedStore } from '../store/cluster-store.js';
import { createClusterStore } from '../store/create-cluster-store.js';
import { startRedisServer } from '../testing/redis-server.js';

/**
 * A task's lifecycle scripts with Redis (`store.lifecycle`), for .specs/65-cluster-store.md. Run
 * after a build: `node apps/orchestratord/dist/bench/lifecycle-bench.js`. Per variant,
 * `LIFECYCLE_BENCH_TASKS` tasks (after `LIFECYCLE_BENCH_WARMUP` untimed), one at a time: p50/p99 µs
 * of what a request waits, orchestratord's CPU µs per task (this process) and redis-server's (INFO
 * cpu), and the round trips it takes.
 *   - reads: admission's inputs pipelined as plain commands (ZCARD, ZCARD, HMGET), the reads
 *     `task-admit` makes itself;
 *   - admit: those reads pipelined then one `task-admit` (two round trips, the script not reading
 *     them) vs one `task-admit` that reads them and decides the budget and deadline checks too;
 *   - dispatch: one `task-take-dispatch`;
 *   - end: one `task-finish`.
 * The separate calls these scripts replaced (create, add, take, dispatch, end, the session's
 * start and end, the three admission reads) are not in the store, so this bench cannot measure
 * them; their figures are in CHANGELOG.md.
 */

const TASKS = Number(process.env.LIFECYCLE_BENCH_TASKS ?? 3000);
const WARMUP = Number(process.env.LIFECYCLE_BENCH_WARMUP ?? 500);
const OWNER_TTL_MS = 15_000;

interface Figures {
  p50_us: number;
  p99_us: number;
  client_cpu_us_per_task: number;
  server_cpu_us_per_task: number;
  /** Commands sent per task, and how many round trips it waits one after the other. */
  commands: number;
  sequential_round_trips: number;
}

const round1 = (x: number): number => Math.round(x * 10) / 10;

function percentile(sorted: readonly number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN;
}

async function serverCpuUs(admin: Redis): Promise<number> {
  const info = await admin.info('cpu');
  const field = (name: string): number => Number(new RegExp(`${name}:([\\d.]+)`).exec(info)?.[1] ?? 0);
  return (field('used_cpu_sys') + field('used_cpu_user')) * 1e6;
}

/** Times `op(i)` for each task: latency per call, and both processes' CPU over the timed ones. */
async function measure(
  admin: Redis,
  [commands, sequential]: [number, number],
  op: (i: number) => Promise<unknown>,
): Promise<Figures> {
  for (let i = 0; i < WARMUP; i += 1) await op(-1 - i);
  const samples: number[] = [];
  const cpu0 = process.cpuUsage();
  const server0 = await serverCpuUs(admin);
  for (let i = 0; i < TASKS; i += 1) {
    const t = process.hrtime.bigint();
    await op(i);
    samples.push(Number(process.hrtime.bigint() - t) / 1000);
  }
  const cpu = process.cpuUsage(cpu0);
  const server = (await serverCpuUs(admin)) - server0;
  samples.sort((a, b) => a - b);
  return {
    p50_us: round1(percentile(samples, 50)),
    p99_us: round1(percentile(samples, 99)),
    client_cpu_us_per_task: round1((cpu.user + cpu.system) / TASKS),
    server_cpu_us_per_task: round1(server / TASKS),
    commands,
    sequential_round_trips: sequential,
  };
}

const record = JSON.stringify({
  model_ref: 'm',
  priority: 'batch',
  session_id: 's',
  admitted_at: 0,
  owner_url: 'http://127.0.0.1:1',
});
const pool = { node_id: 'n1', pool_id: 'p1' };

async function run(store: SharedStore, raw: Redis, admin: Redis, prefix: string): Promise<Record<string, Figures>> {
  // Each variant its own ids (and a queue with a few others' entries in it, as a loaded cluster has).
  for (let i = 0; i < 32; i += 1) {
    await store.lifecycle.admit({
      task: { id: `filler-${i}`, owner: 'X', record, ttlMs: 3_600_000, lifetimeMs: 3_600_000 },
      entry: { lane: 'batch', group: `other-${i % 4}`, payload: 'X' },
      sessionId: `filler-${i}`,
    });
  }
  const id = (v: string, i: number): string => `${v}-${i}`;
  const admitOf = (tid: string, group = 'm') => ({
    task: { id: tid, owner: 'A', record, ttlMs: OWNER_TTL_MS, lifetimeMs: 60_000 },
    entry: { lane: 'batch' as const, group, payload: 'A', deadlineMs: 60_000 },
    sessionId: `s-${tid}`,
  });
  const out: Record<string, Figures> = {};
  const readsPipelined = (i: number) =>
    raw
      .pipeline()
      .zcard(`${prefix}q:g:interactive:m`)
      .zcard(`${prefix}q:g:batch:m`)
      .hmget(`${prefix}session:s-${i}`, 'turns', 'tokens_out', 'node_id', 'pool_id')
      .exec();
  // The client's code paths warm before any is timed (the first variant measured paid for the JIT).
  for (let i = 0; i < 3 * WARMUP; i += 1) await readsPipelined(i);
  out.reads_pipelined = await measure(admin, [3, 1], readsPipelined);

  out.admit_reads_then_script = await measure(admin, [4, 2], async (i) => {
    await readsPipelined(i);
    // another model's queue: the tasks dispatched below are first of theirs, as the gate sends them
    await store.lifecycle.admit(admitOf(id('two', i), 'two'));
  });
  out.admit_one_script = await measure(admin, [1, 1], (i) =>
    store.lifecycle.admit({ ...admitOf(id('one', i)), maxAhead: 1_000_000 }),
  );
  out.dispatch_one_script = await measure(admin, [1, 1], (i) =>
    store.lifecycle.dispatch(id('one', i), 1, JSON.stringify(pool)),
  );
  out.end_one_script = await measure(admin, [1, 1], (i) =>
    store.lifecycle.finish({
      id: id('one', i),
      fence: 1,
      outcome: '{"event":"end"}',
      retainMs: 60_000,
      dequeue: false,
      session: { id: `s-${id('one', i)}`, tokensOut: 10, pool },
    }),
  );
  return out;
}

const logger = pino({ level: 'silent' });
const redis = await startRedisServer();
try {
  const prefix = 'lifecycle-bench:';
  const store = await createClusterStore(
    { redis_url: redis.url, redis_prefix: prefix, admission_capacity: 1_000_000 },
    { clock: systemClock, logger },
  );
  if (!store.shared) throw new Error('a Redis store is a shared one');
  const raw = new Redis(redis.url);
  const admin = new Redis(redis.url);
  const result = { tasks: TASKS, warmup: WARMUP, node: process.version, redis: await run(store, raw, admin, prefix) };
  await Promise.all([store.close(), raw.quit(), admin.quit()]);
  process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
} finally {
  await redis.stop();
}
