/** How `llorch up` restarts a daemon that exits (the replicas of `--replicas`). */
export interface RestartPolicy {
  /** Delay before the first restart, ms; doubled for each restart still in the window. */
  initialMs: number;
  /** Longest delay, ms. */
  maxMs: number;
  /** Restarts allowed within `windowMs`; one more exit stops the cluster. */
  maxRestarts: number;
  windowMs: number;
}

/** 0.5 s, 1 s, 2 s, 4 s, 8 s; a sixth exit within a minute stops the cluster. */
export const REPLICA_RESTART_POLICY: Readonly<RestartPolicy> = Object.freeze({
  initialMs: 500,
  maxMs: 10_000,
  maxRestarts: 5,
  windowMs: 60_000,
});

/**
 * The restarts of one daemon: exponential backoff over the restarts in the sliding window, so a
 * daemon that ran quietly for a window starts again from `initialMs`, and one that keeps dying
 * runs out of restarts instead of flapping forever.
 */
export class RestartBudget {
  readonly #policy: RestartPolicy;
  readonly #now: () => number;
  #restarts: number[] = [];

  constructor(policy: RestartPolicy = REPLICA_RESTART_POLICY, now: () => number = Date.now) {
    this.#policy = policy;
    this.#now = now;
  }

  /** Delay before the next restart, ms (counted as done), or undefined when the window's restarts are used up. */
  next(): number | undefined {
    const t = this.#now();
    this.#restarts = this.#restarts.filter((at) => t - at < this.#policy.windowMs);
    if (this.#restarts.length >= this.#policy.maxRestarts) return undefined;
    const delay = Math.min(this.#policy.maxMs, this.#policy.initialMs * 2 ** this.#restarts.length);
    this.#restarts.push(t);
    return delay;
  }
}
