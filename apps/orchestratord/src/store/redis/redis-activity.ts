import { DashboardTaskSchema, type DashboardTask, type ThroughputPoint } from '@llama-orch/contracts';
import { mergeBucket, RECENT_TASKS_TTL_MS, type ActivityStore, type ThroughputContribution, type TtftShare } from '../activity-store.js';
import { LuaScript } from './lua-script.js';
import type { RedisConnection } from './redis-client.js';

/** Most buckets one read asks for (a caller asking for more gets the newest ones). */
const MAX_BUCKETS_READ = 1000;

// KEYS = one hash per bucket (<prefix>act:tp:<width>:<start>: `tokens`, `ended`, `ttft:<replica>` = "p50 count").
// ARGV: replica id, retain ms, then per key: tokens, tasks ended, ttft p50 ('' = none), ttft count.
// One script for the whole batch: a bucket's counters and its expiry change together.
const ADD_THROUGHPUT = new LuaScript(
  'activity-add-throughput',
  `for i, key in ipairs(KEYS) do
  local a = 2 + (i - 1) * 4
  redis.call('HINCRBY', key, 'tokens', ARGV[a + 1])
  redis.call('HINCRBY', key, 'ended', ARGV[a + 2])
  if ARGV[a + 3] ~= '' then redis.call('HSET', key, 'ttft:' .. ARGV[1], ARGV[a + 3] .. ' ' .. ARGV[a + 4]) end
  redis.call('PEXPIRE', key, ARGV[2])
end
return #KEYS`,
);

export class RedisActivity implements ActivityStore {
  readonly #redis: RedisConnection;

  constructor(redis: RedisConnection) {
    this.#redis = redis;
  }

  async recordTasks(rows: readonly DashboardTask[], keep: number): Promise<void> {
    if (rows.length === 0) return;
    const key = `${this.#redis.prefix}act:tasks`;
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
    const rows = await this.#redis.call((c) => c.lrange(`${this.#redis.prefix}act:tasks`, 0, limit - 1), 'activity recent tasks');
    return rows.map((r) => DashboardTaskSchema.parse(JSON.parse(r)));
  }

  async addThroughput(replicaId: string, bucketMs: number, contributions: readonly ThroughputContribution[], retainMs: number): Promise<void> {
    if (contributions.length === 0) return;
    const keys = contributions.map((c) => this.#bucketKey(bucketMs, c.t_ms));
    const args: Array<string | number> = [replicaId, Math.max(1, Math.round(retainMs))];
    for (const c of contributions) args.push(Math.round(c.tokens), c.tasks_ended, c.ttft_p50_ms !== undefined && c.ttft_count > 0 ? c.ttft_p50_ms : '', c.ttft_count);
    await this.#redis.eval(ADD_THROUGHPUT, keys, args);
  }

  async throughput(bucketMs: number, fromMs: number, toMs: number): Promise<ThroughputPoint[]> {
    const starts: number[] = [];
    for (let t = Math.max(fromMs, toMs - MAX_BUCKETS_READ * bucketMs); t < toMs; t += bucketMs) starts.push(t);
    if (starts.length === 0) return [];
    // Reads need no atomicity: one pipelined round trip for every bucket.
    const hashes = await this.#redis.call(async (c) => {
      const results = await starts.reduce((p, t) => p.hgetall(this.#bucketKey(bucketMs, t)), c.pipeline()).exec();
      return (results ?? []).map(([err, hash]) => {
        if (err !== null) throw err;
        return hash as Record<string, string>;
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

  #bucketKey(bucketMs: number, t: number): string {
    return `${this.#redis.prefix}act:tp:${bucketMs}:${t}`;
  }
}
