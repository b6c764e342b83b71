import type { AcquireOutcome, OwnedBy, OwnedTask, StoredTask, TaskOwnershipStore } from '../task-ownership-store.js';
import type { RedisConnection } from './redis-client.js';
import type { RedisScripts } from './redis-scripts.js';
import { parseTask } from './script-replies.js';

/** Task records with owner leases and fences in Redis (lua/includes/task-record.lua, lua/task-*.lua). */
export class RedisTasks implements TaskOwnershipStore {
  readonly #redis: RedisConnection;
  readonly #scripts: RedisScripts;

  constructor(redis: RedisConnection, scripts: RedisScripts) {
    this.#redis = redis;
    this.#scripts = scripts;
  }

  acquire(id: string, owner: string, ttlMs: number, record?: string): Promise<AcquireOutcome> {
    return this.#scripts.taskAcquire(id, owner, ttlMs, record);
  }

  seize(id: string, from: OwnedBy, owner: string, ttlMs: number, record?: string): Promise<AcquireOutcome> {
    return this.#scripts.taskSeize(id, from, owner, ttlMs, record);
  }

  async renewMany(tasks: readonly OwnedTask[], ttlMs: number): Promise<string[]> {
    if (tasks.length === 0) return [];
    return this.#scripts.taskRenewMany(tasks, ttlMs);
  }

  lapsed(limit: number): Promise<string[]> {
    return this.#scripts.taskLapsed(limit);
  }

  async get(id: string): Promise<StoredTask | undefined> {
    const h = await this.#redis.call((c) => c.hgetall(this.#scripts.keys.task(id)), 'task get');
    return h.state === undefined ? undefined : parseTask(id, h);
  }
}
