import type { Clock } from '@llama-orch/daemon-support';
import {
  decodeCursor,
  encodeCursor,
  isAfter,
  listOrder,
  matchesQuery,
  TASK_RECORD_SCAN_LIMIT,
} from '../task-record-query.js';
import type {
  RecordRetention,
  TaskRecordEntry,
  TaskRecordPage,
  TaskRecordQuery,
  TaskRecordStore,
} from '../task-record-store.js';
import { BoundedExpiringMap } from './bounded-expiring-map.js';

/**
 * Task records in this process: a bounded map in insertion order (a task's first write is its
 * admission, so past `maxCount` the oldest admitted goes first, after the expired; a later write of
 * the same id keeps its place). Expiry is judged by the clock on read. `list` sorts what is live on
 * every call: at the default 10,000 entries that is a few milliseconds, and it keeps no second
 * structure to drift from the map.
 */
export class MemoryTaskRecords implements TaskRecordStore {
  readonly #entries: BoundedExpiringMap<TaskRecordEntry>;

  constructor(clock: Clock, retention: RecordRetention) {
    this.#entries = new BoundedExpiringMap(clock, retention.maxCount);
  }

  put(entry: TaskRecordEntry, ttlMs: number): Promise<void> {
    this.#entries.set(entry.id, entry, ttlMs);
    return Promise.resolve();
  }

  get(id: string): Promise<TaskRecordEntry | undefined> {
    return Promise.resolve(this.#entries.get(id));
  }

  list(q: TaskRecordQuery): Promise<TaskRecordPage> {
    // A bad cursor rejects, as with Redis, rather than throwing before a promise exists.
    try {
      return Promise.resolve(this.#page(q));
    } catch (err) {
      return Promise.reject(err as Error);
    }
  }

  delete(id: string): Promise<boolean> {
    return Promise.resolve(this.#entries.delete(id));
  }

  #page(q: TaskRecordQuery): TaskRecordPage {
    const cursor = decodeCursor(q.cursor);
    const sorted = this.#entries
      .values()
      .filter((e) => q.since === undefined || e.admittedAt >= q.since)
      .sort(listOrder);
    let i = cursor === undefined ? 0 : sorted.findIndex((e) => isAfter(e, cursor));
    if (i < 0) i = sorted.length;
    // The same walk as the Redis store's: at most TASK_RECORD_SCAN_LIMIT examined, `next` only
    // while something is left past the last one examined.
    const entries: TaskRecordEntry[] = [];
    for (let scanned = 0; i < sorted.length; i += 1) {
      const e = sorted[i] as TaskRecordEntry;
      if (scanned === TASK_RECORD_SCAN_LIMIT) return { entries, next: encodeCursor(sorted[i - 1]!) };
      scanned += 1;
      if (!matchesQuery(e, q)) continue;
      entries.push(e);
      if (entries.length >= q.limit) return { entries, next: i + 1 < sorted.length ? encodeCursor(e) : undefined };
    }
    return { entries, next: undefined };
  }
}
