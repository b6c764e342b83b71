import type { SlotAcquireOutcome, SlotLeaseRequest, SlotLeaseStore } from '../slot-lease-store.js';
import { LuaScript, NOW_MS } from './lua-script.js';
import type { RedisConnection } from './redis-client.js';
import { signalsChannel } from './redis-signals.js';

// KEYS[1] = <prefix>leases:<poolKey>, a sorted set: lease id → expiry (server ms). Expired leases
// are purged first on every touch; an empty set is deleted by Redis itself.
const PURGE = `${NOW_MS}local now = now_ms()
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
`;

/** ARGV: lease id, slots, ttl ms, signals channel, pool key → {granted 0|1, expires_at, held}; a new lease is signalled. */
const ACQUIRE = new LuaScript(
  'lease-acquire',
  `${PURGE}local exp = now + tonumber(ARGV[3])
if redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  redis.call('ZADD', KEYS[1], exp, ARGV[1])
  return {1, exp, redis.call('ZCARD', KEYS[1])}
end
local held = redis.call('ZCARD', KEYS[1])
if held >= tonumber(ARGV[2]) then return {0, 0, held} end
redis.call('ZADD', KEYS[1], exp, ARGV[1])
redis.call('PUBLISH', ARGV[4], 'lease\t' .. ARGV[5] .. '\t' .. (held + 1) .. '\t' .. ARGV[1] .. '\t+')
return {1, exp, held + 1}`,
);

/** ARGV: lease id, ttl ms → 1 renewed, 0 lapsed or released. */
const RENEW = new LuaScript(
  'lease-renew',
  `${PURGE}if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then return 0 end
redis.call('ZADD', KEYS[1], 'XX', now + tonumber(ARGV[2]), ARGV[1])
return 1`,
);

/** ARGV: lease id, signals channel, pool key → 1 released (signalled), 0 not held. */
const RELEASE = new LuaScript(
  'lease-release',
  `${PURGE}if redis.call('ZREM', KEYS[1], ARGV[1]) == 0 then return 0 end
redis.call('PUBLISH', ARGV[2], 'lease\t' .. ARGV[3] .. '\t' .. redis.call('ZCARD', KEYS[1]) .. '\t' .. ARGV[1] .. '\t-')
return 1`,
);

const HELD = new LuaScript('lease-held', `${PURGE}return redis.call('ZCARD', KEYS[1])`);

const LIST = new LuaScript('lease-list', `${PURGE}return redis.call('ZRANGE', KEYS[1], 0, -1)`);

/** The sorted set of a pool's slot leases (lease id → expiry, server ms); the dispatch script counts it too. */
export function slotLeasesKey(prefix: string, poolKey: string): string {
  return `${prefix}leases:${poolKey}`;
}

export class RedisSlotLeases implements SlotLeaseStore {
  readonly #redis: RedisConnection;

  readonly #channel: string;

  constructor(redis: RedisConnection) {
    this.#redis = redis;
    this.#channel = signalsChannel(redis.prefix);
  }

  #key(poolKey: string): string {
    return slotLeasesKey(this.#redis.prefix, poolKey);
  }

  async acquire({ poolKey, slots, leaseId, ttlMs }: SlotLeaseRequest): Promise<SlotAcquireOutcome> {
    const [granted, expiresAt, held] = (await this.#redis.eval(ACQUIRE, [this.#key(poolKey)], [leaseId, slots, ttlMs, this.#channel, poolKey])) as [number, number, number];
    return granted === 1 ? { kind: 'granted', expiresAt, held } : { kind: 'full', held };
  }

  async renew(poolKey: string, leaseId: string, ttlMs: number): Promise<boolean> {
    return (await this.#redis.eval(RENEW, [this.#key(poolKey)], [leaseId, ttlMs])) === 1;
  }

  async release(poolKey: string, leaseId: string): Promise<boolean> {
    return (await this.#redis.eval(RELEASE, [this.#key(poolKey)], [leaseId, this.#channel, poolKey])) === 1;
  }

  async held(poolKey: string): Promise<number> {
    return (await this.#redis.eval(HELD, [this.#key(poolKey)], [])) as number;
  }

  async list(poolKey: string): Promise<string[]> {
    return (await this.#redis.eval(LIST, [this.#key(poolKey)], [])) as string[];
  }
}
