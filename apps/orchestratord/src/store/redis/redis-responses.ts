import { z } from 'zod';
import type { ResponseStore, StoredResponseEntry } from '../response-store.js';
import type { RecordRetention } from '../task-record-store.js';
import type { RedisConnection } from './redis-client.js';
import { RedisRecordSet } from './redis-record-set.js';
import type { RedisScripts } from './redis-scripts.js';

const StoredResponseEntrySchema = z
  .strictObject({ id: z.string().min(1), clientKey: z.string().optional(), body: z.string() })
  .transform((v): StoredResponseEntry => ({ id: v.id, clientKey: v.clientKey, body: v.body }));

/**
 * Stored Responses shared by every replica: `resp:<id>` with its TTL, ordered by first write in
 * `resps` (a rewrite keeps its place, as in-process), the oldest dropped past `maxCount`.
 */
export class RedisResponses implements ResponseStore {
  readonly #set: RedisRecordSet<StoredResponseEntry>;

  constructor(redis: RedisConnection, scripts: RedisScripts, retention: RecordRetention) {
    this.#set = new RedisRecordSet(redis, scripts, {
      keys: scripts.keys.responses,
      schema: StoredResponseEntrySchema,
      what: 'stored response',
      maxCount: retention.maxCount,
    });
  }

  put(entry: StoredResponseEntry, ttlMs: number): Promise<void> {
    return this.#set.put(entry, ttlMs, undefined);
  }

  get(id: string): Promise<StoredResponseEntry | undefined> {
    return this.#set.get(id);
  }

  delete(id: string): Promise<boolean> {
    return this.#set.delete(id);
  }
}
