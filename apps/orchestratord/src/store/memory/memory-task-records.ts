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

interface Held {
  readonly entry: TaskRecordEntry;
  readonly expiresAt: number;
}

/**
 * Task records in this process: a Map in insertion order (a task's first write is its admission,
 * so the first entry is the oldest admitted and goes first past `maxCount`; a later write of the
 * same id keeps its place). Expiry is judged by the clock on read. `list` sorts what is live on
 * every call: at the default 10,000 entries that is a few milliseconds, and it keeps no second
 * structure to drift from the map.
 */
export class MemoryTaskRecords implements TaskRecordStore {
  readonly #clock: Clock;
  readonly #retention: RecordRetention;
  readonly #entries = new Map<string, Held>();

  constructor(clock: Clock, retention: RecordRetention) {
    this.#clock = clock;
    this.#retention = retention;
  }

  put(entry: TaskRecordEntry, ttlMs: number): Promise<void> {
    this.#entries.set(entry.id, { entry, expiresAt: this.#clock.now() + ttlMs });
    for (const id of this.#entries.keys()) {
      if (this.#entries.size <= this.#retention.maxCount) break;
      this.#entries.delete(id);
    }
    return Promise.resolve();
  }

  get(id: string): Promise<TaskRecordEntry | undefined> {
    return Promise.resolve(this.#live(id, this.#clock.now())?.entry);
  }

  list(q: TaskRecordQuery): Promise<TaskRecordPage> {
    const cursor = decodeCursor(q.cursor);
    const now = this.#clock.now();
    const sorted: TaskRecordEntry[] = [];
    for (const id of [...this.#entries.keys()]) {
      const held = this.#live(id, now);
      if (held !== undefined && (q.since === undefined || held.entry.admittedAt >= q.since)) sorted.push(held.entry);
    }
    sorted.sort(listOrder);
    let i = cursor === undefined ? 0 : sorted.findIndex((e) => isAfter(e, cursor));
    if (i < 0) i = sorted.length;
    // The same walk as the Redis store's: at most TASK_RECORD_SCAN_LIMIT examined, `next` only
    // while something is left past the last one examined.
    const entries: TaskRecordEntry[] = [];
    for (let scanned = 0; i < sorted.length; i += 1) {
      const e = sorted[i] as TaskRecordEntry;
      if (scanned === TASK_RECORD_SCAN_LIMIT) return Promise.resolve({ entries, next: encodeCursor(sorted[i - 1]!) });
      scanned += 1;
      if (!matchesQuery(e, q)) continue;
      entries.push(e);
      if (entries.length >= q.limit)
        return Promise.resolve({ entries, next: i + 1 < sorted.length ? encodeCursor(e) : undefined });
    }
    return Promise.resolve({ entries, next: undefined });
  }

  delete(id: string): Promise<boolean> {
    return Promise.resolve(this.#live(id, this.#clock.now()) !== undefined && this.#entries.delete(id));
  }

  /** The entry of `id` unless expired (an expired one is dropped here). */
  #live(id: string, now: number): Held | undefined {
    const held = this.#entries.get(id);
    if (held === undefined || held.expiresAt > now) return held;
    this.#entries.delete(id);
    return undefined;
  }
}
