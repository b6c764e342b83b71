import { z } from 'zod';
import {
  decodeCursor,
  encodeCursor,
  isAfter,
  matchesQuery,
  TASK_RECORD_SCAN_LIMIT,
  type ListPosition,
} from '../task-record-query.js';
import type {
  RecordRetention,
  TaskRecordEntry,
  TaskRecordPage,
  TaskRecordQuery,
  TaskRecordStore,
} from '../task-record-store.js';
import type { RedisConnection } from './redis-client.js';
import type { RecordSetKeys } from './redis-keys.js';
import { RedisRecordSet } from './redis-record-set.js';
import type { RedisScripts } from './redis-scripts.js';

const TaskRecordEntrySchema = z
  .strictObject({
    id: z.string().min(1),
    state: z.enum(['queued', 'running', 'ended']),
    model: z.string(),
    modelRef: z.string(),
    priority: z.enum(['interactive', 'batch']),
    admittedAt: z.number(),
    clientKey: z.string().optional(),
    owner: z.string(),
    body: z.string(),
  })
  .transform((v): TaskRecordEntry => ({ ...v, clientKey: v.clientKey }));

/** Index members one read asks for at most (with their values: one ZREVRANGEBYSCORE, one MGET). */
const MAX_BATCH = 500;

/**
 * Task records shared by every replica: `taskrec:<id>` with its TTL, ordered by admission time in
 * `taskrecs` (lua/record-put.lua keeps the bound and drops members whose TTL passed). A list walks
 * the index newest first in growing batches, filters here, and stops after
 * TASK_RECORD_SCAN_LIMIT members with `next`; members whose entry expired are skipped and dropped.
 */
export class RedisTaskRecords implements TaskRecordStore {
  readonly #redis: RedisConnection;
  readonly #scripts: RedisScripts;
  readonly #set: RedisRecordSet<TaskRecordEntry>;

  constructor(redis: RedisConnection, scripts: RedisScripts, retention: RecordRetention) {
    this.#redis = redis;
    this.#scripts = scripts;
    this.#set = new RedisRecordSet(redis, scripts, {
      keys: scripts.keys.taskRecords,
      schema: TaskRecordEntrySchema,
      what: 'task record',
      maxCount: retention.maxCount,
    });
  }

  put(entry: TaskRecordEntry, ttlMs: number): Promise<void> {
    return this.#set.put(entry, ttlMs, entry.admittedAt);
  }

  get(id: string): Promise<TaskRecordEntry | undefined> {
    return this.#set.get(id);
  }

  delete(id: string): Promise<boolean> {
    return this.#set.delete(id);
  }

  async list(q: TaskRecordQuery): Promise<TaskRecordPage> {
    const walk = new IndexWalk(this.#redis, this.#set.keys, decodeCursor(q.cursor), q.since, q.limit + 1);
    const entries: TaskRecordEntry[] = [];
    const gone: string[] = [];
    let next: string | undefined;
    let last: ListPosition | undefined;
    for (let scanned = 0; ; scanned += 1) {
      const m = await walk.peek();
      if (m === undefined) break;
      if (scanned === TASK_RECORD_SCAN_LIMIT) {
        next = encodeCursor(last!);
        break;
      }
      walk.take();
      last = m;
      if (m.value === null) {
        gone.push(m.id);
        continue;
      }
      const entry = this.#set.decode(m.id, m.value);
      if (!matchesQuery(entry, q)) continue;
      entries.push(entry);
      if (entries.length >= q.limit) {
        next = (await walk.peek()) === undefined ? undefined : encodeCursor(m);
        break;
      }
    }
    // Conditional (the entry may have been written again since the read): record-prune checks each.
    if (gone.length > 0) await this.#scripts.recordPrune(this.#set.keys, gone);
    return { entries, next };
  }
}

interface IndexMember extends ListPosition {
  /** The entry's JSON; null when its key expired (or was trimmed) after the index was read. */
  readonly value: string | null;
}

/**
 * The order index read newest first from just after a position, a batch at a time (each twice the
 * last, up to MAX_BATCH). ZREVRANGEBYSCORE gives members of equal score in reverse byte order of
 * their id: the list's own tie order, so a batch read from the cursor's score holds the members
 * the cursor already passed first, and they are dropped here.
 */
class IndexWalk {
  readonly #redis: RedisConnection;
  readonly #keys: RecordSetKeys;
  readonly #min: string;
  #after: ListPosition | undefined;
  #batch: number;
  #buffer: IndexMember[] = [];
  #at = 0;
  #end = false;

  constructor(
    redis: RedisConnection,
    keys: RecordSetKeys,
    after: ListPosition | undefined,
    since: number | undefined,
    firstBatch: number,
  ) {
    this.#redis = redis;
    this.#keys = keys;
    this.#after = after;
    this.#min = since === undefined ? '-inf' : String(since);
    this.#batch = Math.max(1, Math.min(MAX_BATCH, firstBatch));
  }

  /** The next member, or undefined past the last. */
  async peek(): Promise<IndexMember | undefined> {
    while (this.#at === this.#buffer.length && !this.#end) await this.#read();
    return this.#buffer[this.#at];
  }

  take(): void {
    this.#at += 1;
  }

  async #read(): Promise<void> {
    const count = this.#batch;
    this.#batch = Math.min(MAX_BATCH, count * 2);
    const after = this.#after;
    const max = after === undefined ? '+inf' : String(after.admittedAt);
    const { members, values, end } = await this.#redis.call(async (c) => {
      // More members than a batch sharing the cursor's score and id or above: read on past them.
      for (let offset = 0; ; offset += count) {
        const flat = await c.zrevrangebyscore(this.#keys.index, max, this.#min, 'WITHSCORES', 'LIMIT', offset, count);
        const read: ListPosition[] = [];
        for (let i = 0; i + 1 < flat.length; i += 2) read.push({ id: flat[i]!, admittedAt: Number(flat[i + 1]) });
        const fresh = read.filter((p) => isAfter(p, after));
        const end = read.length < count;
        if (fresh.length === 0 && !end) continue;
        const values = fresh.length === 0 ? [] : await c.mget(fresh.map((p) => this.#keys.entryPrefix + p.id));
        return { members: fresh, values, end };
      }
    }, 'task record list');
    this.#buffer = members.map((p, i) => ({ ...p, value: values[i] ?? null }));
    this.#at = 0;
    this.#end = end;
    this.#after = members.at(-1) ?? after;
  }
}
