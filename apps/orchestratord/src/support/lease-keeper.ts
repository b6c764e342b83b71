/** Something that holds leases in the cluster store and must renew them before they lapse. */
export interface LeaseHolder {
  /** Renews everything it holds now. Never throws; a holder keeps one round in flight at a time. */
  renewHeld(): void;
}

export type LeaseKeeperState = 'running' | 'closed';

/**
 * The one loop that renews every lease this process holds (task owner leases, slot leases): one
 * timer every `periodMs` calls each registered holder, as BullMQ's lock manager renews a worker's
 * jobs. One period for all — a quarter of the shortest lease — so no lease can outlive a tick
 * that forgot it, and `close()` stops every renewal at once. The timer is `unref`ed: renewals
 * never keep the process alive.
 */
export class LeaseKeeper {
  readonly periodMs: number;
  readonly #holders = new Set<LeaseHolder>();
  readonly #timer: NodeJS.Timeout;
  #state: LeaseKeeperState = 'running';

  constructor(options: { periodMs: number }) {
    this.periodMs = Math.max(10, Math.floor(options.periodMs));
    this.#timer = setInterval(() => {
      for (const h of this.#holders) h.renewHeld();
    }, this.periodMs);
    this.#timer.unref();
  }

  get state(): LeaseKeeperState {
    return this.#state;
  }

  /** Renews `holder`'s leases on every tick from now on. Returns the function that stops it. */
  keep(holder: LeaseHolder): () => void {
    this.#holders.add(holder);
    return () => this.#holders.delete(holder);
  }

  /** Stops every renewal. Idempotent. */
  close(): Promise<void> {
    if (this.#state === 'running') {
      this.#state = 'closed';
      clearInterval(this.#timer);
      this.#holders.clear();
    }
    return Promise.resolve();
  }
}
