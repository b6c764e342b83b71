import type { Clock } from '@llama-orch/daemon-support';
import type { ResponseStore, StoredResponseEntry } from '../response-store.js';
import type { RecordRetention } from '../task-record-store.js';

interface Held {
  readonly entry: StoredResponseEntry;
  readonly expiresAt: number;
}

/**
 * Stored Responses in this process: a Map in insertion order, so past `maxCount` the first written
 * goes first (a later write of the same id keeps its place); expiry judged by the clock on read.
 */
export class MemoryResponses implements ResponseStore {
  readonly #clock: Clock;
  readonly #retention: RecordRetention;
  readonly #entries = new Map<string, Held>();

  constructor(clock: Clock, retention: RecordRetention) {
    this.#clock = clock;
    this.#retention = retention;
  }

  put(entry: StoredResponseEntry, ttlMs: number): Promise<void> {
    this.#entries.set(entry.id, { entry, expiresAt: this.#clock.now() + ttlMs });
    for (const id of this.#entries.keys()) {
      if (this.#entries.size <= this.#retention.maxCount) break;
      this.#entries.delete(id);
    }
    return Promise.resolve();
  }

  get(id: string): Promise<StoredResponseEntry | undefined> {
    return Promise.resolve(this.#live(id)?.entry);
  }

  delete(id: string): Promise<boolean> {
    return Promise.resolve(this.#live(id) !== undefined && this.#entries.delete(id));
  }

  #live(id: string): Held | undefined {
    const held = this.#entries.get(id);
    if (held === undefined || held.expiresAt > this.#clock.now()) return held;
    this.#entries.delete(id);
    return undefined;
  }
}
