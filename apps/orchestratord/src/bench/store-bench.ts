#!/usr/bin/env node
import { systemClock } from '@llama-orch/daemon-support';
import { pino } from 'pino';
import type { ClusterStore } from '../store/cluster-store.js';
import { createClusterStore } from '../store/create-cluster-store.js';
import { startRedisServer } from '../testing/redis-server.js';

/**
 * Cluster store op latency, in-process vs Redis (a redis-server on loopback started here), for the
 * figures in .specs/65-cluster-store.md. The in-process store has only the parts one process uses
 * (rate limits, activity): the lease and task ops are measured with Redis only. Run after a build: `node apps/orchestratord/dist/bench/store-bench.js`.
 * Prints one JSON object: per store and op, p50/p99/mean in µs over `STORE_BENCH_OPS` calls made
 * one at a time (the latency a request waits), after `STORE_BENCH_WARMUP` untimed ones.
 *   - lease_acquire / lease_release: a 2-slot pool, acquire then release (never full);
 *   - task_admit / task_dispatch (shared store only): a task's admission (record, queue entry,
 *     session turn) and its dispatch as the first of its model (64 other entries queued, so the
 *     lanes are not empty);
 *   - rate_limit_hit: one request of a key;
 *   - activity_record / activity_bucket / activity_read: the dashboard's writes (one ended task into
 *     the 50-row list; one replica's share of one closed 5 s bucket) and one snapshot's read (the
 *     50 recent tasks and the 120 buckets of the window, together as the feed reads them);
 *   - record_put / record_get / record_list: one write of a task's record as the journal makes it
 *     (three per task: admitted, placed, ended; ~700-byte body, 10,000 kept), one `GET
 *     /v2/tasks/{id}` read, one 50-task page of `GET /v2/tasks` (the newest, no filter).
 */

const OPS = Number(process.env.STORE_BENCH_OPS ?? 5000);
const WARMUP = Number(process.env.STORE_BENCH_WARMUP ?? 500);

type Op =
  | 'lease_acquire'
  | 'lease_release'
  | 'task_admit'
  | 'task_dispatch'
  | 'rate_limit_hit'
  | 'activity_record'
  | 'activity_bucket'
  | 'activity_read'
  | 'record_put'
  | 'record_get'
  | 'record_list';

const BUCKET_MS = 5000;
const row = (id: string) => ({
  task_id: id,
  correlation_id: id,
  model: 'm',
  priority: 'interactive' as const,
  node_id: 'n1',
  pool_id: 'p1',
  tokens_out: 64,
  ttft_ms: 40,
  duration_ms: 900,
  outcome: 'ok' as const,
  ended_at_ms: Date.now(),
});

/** A task's record as the journal writes it (tasks/task-journal.ts), with a body of a typical size. */
const record = (id: string, i: number) => ({
  id,
  state: 'ended' as const,
  model: 'm',
  modelRef: 'm',
  priority: 'interactive' as const,
  admittedAt: Date.now() + i,
  clientKey: 'bench-key',
  owner: 'bench',
  body: JSON.stringify({ ...row(id), filler: 'x'.repeat(420) }),
});

function percentile(sorted: readonly number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN;
}

const round1 = (x: number): number => Math.round(x * 10) / 10;

async function time(samples: number[] | undefined, f: () => Promise<unknown>): Promise<void> {
  const t = process.hrtime.bigint();
  await f();
  samples?.push(Number(process.hrtime.bigint() - t) / 1000);
}

async function measure(
  store: ClusterStore,
): Promise<Partial<Record<Op, { p50_us: number; p99_us: number; mean_us: number }>>> {
  const shared = store.shared;
  const s: Record<Op, number[]> = {
    lease_acquire: [],
    lease_release: [],
    task_admit: [],
    task_dispatch: [],
    rate_limit_hit: [],
    activity_record: [],
    activity_bucket: [],
    activity_read: [],
    record_put: [],
    record_get: [],
    record_list: [],
  };
  // A full window: 120 written buckets to read back.
  const now = Math.floor(Date.now() / BUCKET_MS) * BUCKET_MS;
  const window = Array.from({ length: 120 }, (_, i) => ({
    t_ms: now - (120 - i) * BUCKET_MS,
    tokens: 1000,
    tasks_ended: 10,
    ttft_p50_ms: 40,
    ttft_count: 10,
  }));
  await store.activity.addThroughput('bench', BUCKET_MS, window, 3_600_000);
  const admission = (id: string, group: string) => ({
    task: { id, owner: 'bench', record: JSON.stringify({ id, model: group }), ttlMs: 3_600_000, lifetimeMs: 3_600_000 },
    entry: { lane: 'batch' as const, group, payload: 'bench', deadlineMs: 3_600_000 },
    sessionId: `s-${id}`,
  });
  if (shared) for (let i = 0; i < 64; i += 1) await store.lifecycle.admit(admission(`filler-${i}`, `other-${i % 8}`));
  for (let i = 0; i < WARMUP + OPS; i += 1) {
    const keep = i >= WARMUP ? s : undefined;
    const id = `t-${i}`;
    if (shared) {
      await time(keep?.lease_acquire, () =>
        store.leases.acquire({ poolKey: 'n1/p1', slots: 2, leaseId: id, ttlMs: 30_000 }),
      );
      await time(keep?.lease_release, () => store.leases.release('n1/p1', id));
      await time(keep?.task_admit, () => store.lifecycle.admit(admission(id, 'm')));
      await time(keep?.task_dispatch, () => store.lifecycle.dispatch(id, 1, 'n1/p1'));
    }
    await time(keep?.rate_limit_hit, () => store.rateLimits.hit('bench-key', 1_000_000, 60_000));
    await time(keep?.activity_record, () => store.activity.recordTasks([row(id)], 50));
    await time(keep?.activity_bucket, () =>
      store.activity.addThroughput('bench', BUCKET_MS, [window[i % 120]!], 3_600_000),
    );
    await time(keep?.activity_read, () =>
      Promise.all([store.activity.recentTasks(50), store.activity.throughput(BUCKET_MS, now - 120 * BUCKET_MS, now)]),
    );
    await time(keep?.record_put, () => store.taskRecords.put(record(id, i), 3_600_000));
    await time(keep?.record_get, () => store.taskRecords.get(id));
    await time(keep?.record_list, () => store.taskRecords.list({ limit: 50 }));
  }
  const out: Partial<Record<Op, { p50_us: number; p99_us: number; mean_us: number }>> = {};
  for (const [op, xs] of Object.entries(s) as [Op, number[]][]) {
    if (xs.length === 0) continue;
    const sorted = [...xs].sort((a, b) => a - b);
    out[op] = {
      p50_us: round1(percentile(sorted, 50)),
      p99_us: round1(percentile(sorted, 99)),
      mean_us: round1(xs.reduce((a, b) => a + b, 0) / xs.length),
    };
  }
  return out;
}

const logger = pino({ level: 'silent' });
const redis = await startRedisServer();
try {
  const memory = await createClusterStore({}, { clock: systemClock, logger });
  const shared = await createClusterStore(
    { redis_url: redis.url, redis_prefix: 'bench:' },
    { clock: systemClock, logger },
  );
  const result = {
    ops: OPS,
    warmup: WARMUP,
    node: process.version,
    memory: await measure(memory),
    redis: await measure(shared),
  };
  await Promise.all([memory.close(), shared.close()]);
  process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
} finally {
  await redis.stop();
}
