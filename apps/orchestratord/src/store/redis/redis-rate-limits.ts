import type { RateLimitHit, RateLimitStore } from '../rate-limit-store.js';
import type { RedisScripts } from './redis-scripts.js';

/** Per-key counters that expire with their window (lua/rate-limit-hit.lua). */
export class RedisRateLimits implements RateLimitStore {
  readonly #scripts: RedisScripts;

  constructor(scripts: RedisScripts) {
    this.#scripts = scripts;
  }

  async hit(key: string, limit: number, windowMs: number): Promise<RateLimitHit> {
    const { count, resetMs } = await this.#scripts.rateLimitHit(key, windowMs);
    return { count, allowed: count <= limit, resetMs };
  }
}
