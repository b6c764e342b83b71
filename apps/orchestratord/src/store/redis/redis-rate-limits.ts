import type { RateLimitHit, RateLimitStore } from '../rate-limit-store.js';
import { LuaScript } from './lua-script.js';
import type { RedisConnection } from './redis-client.js';

// KEYS[1] = <prefix>rl:<key>, a counter that expires with its window (server time). ARGV: window ms → {count, ttl ms}.
// INCR and PEXPIRE in one script: a counter can never be left without its expiry.
const HIT = new LuaScript(
  'rate-limit-hit',
  `local n = redis.call('INCR', KEYS[1])
local ttl = redis.call('PTTL', KEYS[1])
if n == 1 or ttl < 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  ttl = tonumber(ARGV[1])
end
return {n, ttl}`,
);

export class RedisRateLimits implements RateLimitStore {
  readonly #redis: RedisConnection;

  constructor(redis: RedisConnection) {
    this.#redis = redis;
  }

  async hit(key: string, limit: number, windowMs: number): Promise<RateLimitHit> {
    const [count, resetMs] = (await this.#redis.eval(HIT, [`${this.#redis.prefix}rl:${key}`], [windowMs])) as [number, number];
    return { count, allowed: count <= limit, resetMs };
  }
}
