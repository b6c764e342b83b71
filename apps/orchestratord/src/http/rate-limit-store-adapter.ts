import type { FastifyRateLimitStore, FastifyRateLimitStoreCtor } from '@fastify/rate-limit';
import type { RateLimitStore } from '../store/rate-limit-store.js';

/**
 * `@fastify/rate-limit` counts through a store class it constructs itself; this makes one that
 * counts in the cluster store's {@link RateLimitStore} (in-process, or Redis: one count for every
 * replica). The plugin keeps its own logic (limit per key, headers, the 429 builder); only the
 * counting moves. A store failure reaches the error handler (retriable 500), never a silent pass.
 */
export function rateLimitStoreClass(store: RateLimitStore): FastifyRateLimitStoreCtor {
  class ClusterRateLimitStore implements FastifyRateLimitStore {
    incr(
      key: string,
      callback: (error: Error | null, result?: { current: number; ttl: number }) => void,
      timeWindow: number,
      max: number,
    ): void {
      store.hit(key, max, timeWindow).then(
        (hit) => callback(null, { current: hit.count, ttl: hit.resetMs }),
        (err: unknown) => callback(err instanceof Error ? err : new Error(String(err))),
      );
    }

    child(): FastifyRateLimitStore {
      return this;
    }
  }
  return ClusterRateLimitStore;
}
