import { DashboardTaskSchema, type DashboardTask, type ThroughputPoint } from '@llama-orch/contracts';
import {
  mergeBucket,
  RECENT_TASKS_TTL_MS,
  type ActivityStore,
  type ThroughputContribution,
  type TtftShare,
} from '../activity-store.js';
import type { RedisConnection } from './redis-client.js';
import type { RedisScripts } from './redis-scripts.js';
import { stringRecord } from './script-replies.js';

/** Most buckets one read asks for (a caller asking for more gets the newest ones). */
const MAX_BUCKETS_READ = 1000;

export class RedisActivity implements ActivityStore {
  readonly #redis: RedisConnection;
  readonly #scripts: RedisScripts;

  constructor(redis: RedisConnection, scripts: RedisScripts) {
    this.#redis = redis;
    this.#scripts = scripts;
  }

  async recordTasks(rows: readonly DashboardTask[], keep: number): Promise<void> {
    if (rows.length === 0) return;
    const key = this.#scripts.keys.recentTasks;
    // MULTI: the push, the trim and the expiry land together, so the list never outgrows `keep` or lives without a TTL.
    await this.#redis.call(async (c) => {
      const results = await c
        .multi()
        .lpush(key, ...rows.map((r) => JSON.stringify(r)))
        .ltrim(key, 0, keep - 1)
        .pexpire(key, RECENT_TASKS_TTL_MS)
        .exec();
      const failed = results?.find(([err]) => err !== null);
      if (failed !== undefined) throw failed[0] as Error;
    }, 'activity record tasks');
  }

  async recentTasks(limit: number): Promise<DashboardTask[]> {
    const rows = await this.#redis.call(
      (c) => c.lrange(this.#scripts.keys.recentTasks, 0, limit - 1),
      'activity recent tasks',
    );
    return rows.map((r) => DashboardTaskSchema.parse(JSON.parse(r)));
  }

  async addThroughput(
    replicaId: string,
    bucketMs: number,
    contributions: readonly ThroughputContribution[],
    retainMs: number,
  ): Promise<void> {
    if (contributions.length === 0) return;
    await this.#scripts.activityAddThroughput(replicaId, bucketMs, contributions, retainMs);
  }

  async throughput(bucketMs: number, fromMs: number, toMs: number): Promise<ThroughputPoint[]> {
    const starts: number[] = [];
    for (let t = Math.max(fromMs, toMs - MAX_BUCKETS_READ * bucketMs); t < toMs; t += bucketMs) starts.push(t);
    if (starts.length === 0) return [];
    // Reads need no atomicity: one pipelined round trip for every bucket.
    const hashes = await this.#redis.call(async (c) => {
      const results = await starts
        .reduce((p, t) => p.hgetall(this.#scripts.keys.throughputBucket(bucketMs, t)), c.pipeline())
        .exec();
      return (results ?? []).map(([err, hash]) => {
        if (err !== null) throw err;
        return stringRecord(hash);
      });
    }, 'activity throughput');
    const out: ThroughputPoint[] = [];
    starts.forEach((t, i) => {
      const fields = hashes[i] ?? {};
      if (Object.keys(fields).length === 0) return;
      const ttfts: TtftShare[] = [];
      for (const [name, value] of Object.entries(fields)) {
        if (!name.startsWith('ttft:')) continue;
        const [p50, count] = value.split(' ').map(Number);
        if (Number.isFinite(p50) && Number.isFinite(count)) ttfts.push({ p50: p50 as number, count: count as number });
      }
      out.push(mergeBucket(t, bucketMs, Number(fields.tokens ?? 0), Number(fields.ended ?? 0), ttfts));
    });
    return out;
  }
}
