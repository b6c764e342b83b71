import { systemClock, type Clock } from '@llama-orch/daemon-support';

export interface RestartLimiterOptions {
  /** Restarts allowed inside the window. @default 10 */
  max?: number;
  /** Sliding window, ms. @default 60000 */
  windowMs?: number;
  /** @default systemClock */
  clock?: Clock;
}

/**
 * Bounds restart storms: at most `max` restarts per sliding `windowMs`, independent of the backoff
 * (which a stable period resets) so flapping engines cannot restart unboundedly.
 */
export class RestartLimiter {
  readonly max: number;
  readonly windowMs: number;
  readonly #clock: Clock;
  #starts: number[] = [];

  constructor(options: RestartLimiterOptions = {}) {
    this.max = options.max ?? 10;
    this.windowMs = options.windowMs ?? 60_000;
    this.#clock = options.clock ?? systemClock;
  }

  /** Records a restart at now. */
  record(): void {
    this.#prune();
    this.#starts.push(this.#clock.now());
  }

  /** ms to wait before the next restart fits in the window (0 = now). */
  waitMs(): number {
    this.#prune();
    if (this.#starts.length < this.max) return 0;
    const oldest = this.#starts[this.#starts.length - this.max] ?? this.#clock.now();
    return Math.max(0, oldest + this.windowMs - this.#clock.now());
  }

  #prune(): void {
    const cutoff = this.#clock.now() - this.windowMs;
    this.#starts = this.#starts.filter((t) => t > cutoff);
  }
}
