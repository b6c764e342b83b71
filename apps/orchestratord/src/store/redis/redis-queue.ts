import type { AdmissionQueueStore, GoneEntry, QueueSizes, QueuedEntry } from '../admission-queue-store.js';
import type { RedisConnection } from './redis-client.js';
import type { RedisScripts } from './redis-scripts.js';

/** The cluster's admission queue in Redis, besides the lifecycle scripts (keys: lua/includes/queue.lua; scripts: lua/queue-*.lua). */
export class RedisQueue implements AdmissionQueueStore {
  readonly #redis: RedisConnection;
  readonly #scripts: RedisScripts;

  constructor(redis: RedisConnection, scripts: RedisScripts) {
    this.#redis = redis;
    this.#scripts = scripts;
  }

  async gone(ids: readonly string[]): Promise<GoneEntry[]> {
    if (ids.length === 0) return [];
    return this.#scripts.queueGone(ids);
  }

  remove(id: string): Promise<QueuedEntry | undefined> {
    return this.#scripts.queueRemove(id);
  }

  async sizes(): Promise<QueueSizes> {
    const [interactive, batch] = this.#scripts.keys.queue;
    const [i, b] = await this.#redis.call((c) => Promise.all([c.zcard(interactive), c.zcard(batch)]), 'queue sizes');
    return { interactive: i, batch: b };
  }
}
