import type { ClusterSignal, ClusterSignalListener, ClusterSignals } from '../../store/cluster-signals.js';

/** Signals inside the reference model: its leases and queue emit them synchronously. */
export class ReferenceSignals implements ClusterSignals {
  readonly #listeners = new Set<ClusterSignalListener>();

  subscribe(listener: ClusterSignalListener): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  emit(signal: ClusterSignal): void {
    for (const l of this.#listeners) l(signal);
  }
}
