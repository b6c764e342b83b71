import type { DashboardSnapshot } from '@llama-orch/contracts';
import type { ModelEvent } from '../catalog/model-events.js';

export type DashboardModelEvent = DashboardSnapshot['model_events'][number];

/** The live feed's entry for a model event. */
export function toDashboardModelEvent(e: ModelEvent): DashboardModelEvent {
  const base = {
    at_ms: Math.max(0, Math.round(e.at)),
    model: e.model,
    node_id: e.nodeId,
    pool_id: e.poolId,
  };
  switch (e.type) {
    case 'load-started':
      return { ...base, kind: 'load_started' };
    case 'load-ended':
      if (e.ending === 'ready') return { ...base, kind: 'load_ready' };
      if (e.ending === 'vanished') return { ...base, kind: 'load_vanished' };
      // `unreported` is a failure too: the node accepted the load and never listed the pool.
      return { ...base, kind: 'load_failed', ...(e.error !== undefined ? { detail: e.error } : {}) };
    case 'unloading':
      return { ...base, kind: 'unloading', cause: e.cause, detail: e.reason };
  }
}

/** The newest `capacity` model events, newest first (this replica's: loads it started, unloads it asked for). */
export class RecentModelEvents {
  readonly #capacity: number;
  /** Oldest first; read reversed. */
  readonly #events: DashboardModelEvent[] = [];

  constructor(capacity: number) {
    this.#capacity = capacity;
  }

  add(e: ModelEvent): void {
    this.#events.push(toDashboardModelEvent(e));
    if (this.#events.length > this.#capacity) this.#events.splice(0, this.#events.length - this.#capacity);
  }

  /** Newest first. */
  list(): DashboardModelEvent[] {
    return this.#events.toReversed();
  }
}
