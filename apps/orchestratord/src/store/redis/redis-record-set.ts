import type { z } from 'zod';
import { StoreUnavailableError } from '../../errors.js';
import type { RedisConnection } from './redis-client.js';
import type { RecordSetKeys } from './redis-keys.js';
import type { RedisScripts } from './redis-scripts.js';

/**
 * What the task records and the stored Responses share with Redis: one string key per entry with
 * its TTL, written with its indexes and trimmed to the bound by lua/record-put.lua; read back
 * through a zod schema (Redis is another process: a value is `unknown` until checked).
 */
export class RedisRecordSet<T extends { readonly id: string }> {
  readonly keys: RecordSetKeys;
  readonly #redis: RedisConnection;
  readonly #scripts: RedisScripts;
  readonly #schema: z.ZodType<T>;
  readonly #what: string;
  readonly #maxCount: number;

  constructor(
    redis: RedisConnection,
    scripts: RedisScripts,
    o: { keys: RecordSetKeys; schema: z.ZodType<T>; what: string; maxCount: number },
  ) {
    this.#redis = redis;
    this.#scripts = scripts;
    this.keys = o.keys;
    this.#schema = o.schema;
    this.#what = o.what;
    this.#maxCount = o.maxCount;
  }

  /** `score` orders the entry (undefined: the server's time of its first write). */
  async put(entry: T, ttlMs: number, score: number | undefined): Promise<void> {
    await this.#scripts.recordPut(this.keys, entry.id, JSON.stringify(entry), ttlMs, score, this.#maxCount);
  }

  async get(id: string): Promise<T | undefined> {
    const raw = await this.#redis.call((c) => c.get(this.keys.entryPrefix + id), `${this.#what} get`);
    return raw === null ? undefined : this.decode(id, raw);
  }

  async delete(id: string): Promise<boolean> {
    const k = this.keys;
    // MULTI: the entry and its index members leave together (a list never finds the members alone).
    const deleted = await this.#redis.call(async (c) => {
      const results = await c
        .multi()
        .del(k.entryPrefix + id)
        .zrem(k.index, id)
        .zrem(k.expiry, id)
        .exec();
      const failed = results?.find(([err]) => err !== null);
      if (failed !== undefined) throw failed[0] as Error;
      return results?.[0]?.[1];
    }, `${this.#what} delete`);
    return deleted === 1;
  }

  /** The entry a value read from Redis holds; StoreUnavailableError when it is not one. */
  decode(id: string, raw: string): T {
    try {
      return this.#schema.parse(JSON.parse(raw));
    } catch (err) {
      throw new StoreUnavailableError(`cluster store ${this.#what} ${id} is malformed: ${(err as Error).message}`, {
        cause: err,
      });
    }
  }
}
