import type { Log } from '@llama-orch/daemon-support';
import type { ProcessStore, StoreHealth } from './cluster-store.js';

/**
 * Keeps the cluster store's last health answer, refreshed every `intervalMs`, so `/readyz` answers
 * from memory (a load balancer probing it never waits on Redis) and still tells the truth: a
 * replica whose store is unreachable reports not ready and leaves the rotation.
 */
export class StoreHealthWatch {
  #last: StoreHealth | undefined;
  #timer: NodeJS.Timeout | undefined;
  #inFlight = false;
  readonly #store: ProcessStore;
  readonly #logger: Log;

  /**
   * `intervalMs`: a PING costs next to nothing, and `/readyz` must turn 503 within 1 s of a Redis
   * SIGKILL (the replica chaos run's bound), which a 1 s interval can miss.
   */
  constructor(store: ProcessStore, logger: Log, intervalMs = 250) {
    this.#store = store;
    this.#logger = logger;
    if (store.kind === 'memory') return;
    this.#timer = setInterval(() => void this.check(), intervalMs);
    this.#timer.unref();
    void this.check();
  }

  /** Why the replica is not ready because of its store, or undefined (healthy, in-process, or not yet checked). */
  get problem(): string | undefined {
    const h = this.#last;
    return h === undefined || h.ok ? undefined : `cluster store unreachable: ${h.error}`;
  }

  /** One health check now (skipped while one is running). */
  async check(): Promise<void> {
    if (this.#inFlight) return;
    this.#inFlight = true;
    try {
      const h = await this.#store.health();
      if (h.ok !== (this.#last?.ok ?? true))
        this.#logger.warn(
          { store_ok: h.ok, ...(h.ok ? {} : { error: h.error }) },
          h.ok ? 'cluster store healthy again' : 'cluster store unhealthy',
        );
      this.#last = h;
    } finally {
      this.#inFlight = false;
    }
  }

  /** Stops the checks; idempotent. */
  close(): void {
    if (this.#timer !== undefined) clearInterval(this.#timer);
    this.#timer = undefined;
  }
}
