import type { ClusterSignal, ClusterSignalListener, ClusterSignals } from '../cluster-signals.js';

/** Signals inside one process: the in-process store's leases and queue emit them synchronously. */
export class MemorySignals implements ClusterSignals {
  readonly #listeners = new Set<ClusterSignalListener>();

  subscribe(listener: ClusterSignalListener): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  emit(signal: ClusterSignal): void {
    for (const l of this.#listeners) l(signal);
  }
}
