import { z } from 'zod';
import type { ReplicaInfo, ReplicaMembershipStore } from '../replica-membership-store.js';
import { LuaScript, NOW_MS } from './lua-script.js';
import type { RedisConnection } from './redis-client.js';

const ReplicaInfoSchema = z.strictObject({
  replica_id: z.string().min(1),
  address: z.string(),
  version: z.string(),
  up_since: z.number(),
  tasks_relayed: z.number().int().min(0),
  load: z.number().min(0),
});

// KEYS[1] = <prefix>replicas (sorted set: id → expiry, server ms), KEYS[2] = <prefix>replica:<id> (JSON, expires with it).
/** ARGV: id, json, ttl ms. */
const ANNOUNCE = new LuaScript(
  'replica-announce',
  `${NOW_MS}redis.call('ZADD', KEYS[1], now_ms() + tonumber(ARGV[3]), ARGV[1])
redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
return 1`,
);

/** ARGV: key prefix → JSON of every live replica, by id. */
const LIST = new LuaScript(
  'replica-list',
  `${NOW_MS}redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now_ms())
local ids = redis.call('ZRANGE', KEYS[1], 0, -1)
local out = {}
for _, id in ipairs(ids) do
  local v = redis.call('GET', ARGV[1] .. 'replica:' .. id)
  if v then out[#out + 1] = v end
end
return out`,
);

export class RedisReplicas implements ReplicaMembershipStore {
  readonly #redis: RedisConnection;

  constructor(redis: RedisConnection) {
    this.#redis = redis;
  }

  async announce(info: ReplicaInfo, ttlMs: number): Promise<void> {
    const p = this.#redis.prefix;
    await this.#redis.eval(ANNOUNCE, [`${p}replicas`, `${p}replica:${info.replica_id}`], [info.replica_id, JSON.stringify(info), ttlMs]);
  }

  async leave(replicaId: string): Promise<void> {
    const p = this.#redis.prefix;
    await this.#redis.call((c) => c.multi().zrem(`${p}replicas`, replicaId).del(`${p}replica:${replicaId}`).exec(), 'replica leave');
  }

  async list(): Promise<ReplicaInfo[]> {
    const rows = (await this.#redis.eval(LIST, [`${this.#redis.prefix}replicas`], [this.#redis.prefix])) as string[];
    return rows.map((r) => ReplicaInfoSchema.parse(JSON.parse(r))).sort((a, b) => (a.replica_id < b.replica_id ? -1 : a.replica_id > b.replica_id ? 1 : 0));
  }
}
