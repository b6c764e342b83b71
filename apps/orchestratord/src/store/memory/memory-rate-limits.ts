import type { Clock } from '@llama-orch/daemon-support';
import type { RateLimitHit, RateLimitStore } from '../rate-limit-store.js';

/** Past this many windows kept, expired ones are swept on the next hit (keys are key names: few). */
const SWEEP_AT = 10_000;

/** Fixed windows in this process (what `@fastify/rate-limit`'s LocalStore does, minus its LRU). */
export class MemoryRateLimits implements RateLimitStore {
  readonly #windows = new Map<string, { count: number; startedAt: number }>();
  readonly #clock: Clock;

  constructor(clock: Clock) {
    this.#clock = clock;
  }

  hit(key: string, limit: number, windowMs: number): Promise<RateLimitHit> {
    const now = this.#clock.now();
    let w = this.#windows.get(key);
    if (w === undefined || w.startedAt + windowMs <= now) {
      if (this.#windows.size >= SWEEP_AT) this.#sweep(now, windowMs);
      w = { count: 0, startedAt: now };
      this.#windows.set(key, w);
    }
    w.count += 1;
    return Promise.resolve({ count: w.count, allowed: w.count <= limit, resetMs: w.startedAt + windowMs - now });
  }

  #sweep(now: number, windowMs: number): void {
    for (const [k, w] of this.#windows) if (w.startedAt + windowMs <= now) this.#windows.delete(k);
  }
}
