import type { Clock } from '@llama-orch/daemon-support';
import type { ResponseStore, StoredResponseEntry } from '../response-store.js';
import type { RecordRetention } from '../task-record-store.js';
import { BoundedExpiringMap } from './bounded-expiring-map.js';

/**
 * Stored Responses in this process: past `maxCount` the expired go first, then the first written
 * (a later write of the same id keeps its place); expiry judged by the clock on read.
 */
export class MemoryResponses implements ResponseStore {
  readonly #entries: BoundedExpiringMap<StoredResponseEntry>;

  constructor(clock: Clock, retention: RecordRetention) {
    this.#entries = new BoundedExpiringMap(clock, retention.maxCount);
  }

  put(entry: StoredResponseEntry, ttlMs: number): Promise<void> {
    this.#entries.set(entry.id, entry, ttlMs);
    return Promise.resolve();
  }

  get(id: string): Promise<StoredResponseEntry | undefined> {
    return Promise.resolve(this.#entries.get(id));
  }

  delete(id: string): Promise<boolean> {
    return Promise.resolve(this.#entries.delete(id));
  }
}
