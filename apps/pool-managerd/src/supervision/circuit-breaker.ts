import type { PoolStatus } from '@llama-orch/contracts';
import { systemClock, type Clock } from '@llama-orch/daemon-support';

/** `closed` → `open` → `half_open` (one trial) → `closed` or `open` again. */
export type BreakerState = PoolStatus['breaker'];

export interface CircuitBreakerOptions {
  /** Consecutive failures that open the circuit. @default 5 */
  threshold?: number;
  /** Time the circuit stays open before one half-open trial, ms. @default 300000 */
  cooldownMs?: number;
  /** @default systemClock */
  clock?: Clock;
}

/**
 * Closed → open after `threshold` consecutive failures; open → half-open once `cooldownMs` passed
 * (checked by {@link CircuitBreaker.check}); a half-open failure re-opens it, a success closes it.
 */
export class CircuitBreaker {
  readonly threshold: number;
  readonly cooldownMs: number;
  readonly #clock: Clock;
  #state: BreakerState = 'closed';
  #failures = 0;
  #openedAt = 0;

  constructor(options: CircuitBreakerOptions = {}) {
    this.threshold = options.threshold ?? 5;
    this.cooldownMs = options.cooldownMs ?? 300_000;
    this.#clock = options.clock ?? systemClock;
  }

  get state(): BreakerState {
    return this.#state;
  }

  get failures(): number {
    return this.#failures;
  }

  /** When an open circuit allows its trial (epoch ms); undefined unless open. */
  get retryAt(): number | undefined {
    return this.#state === 'open' ? this.#openedAt + this.cooldownMs : undefined;
  }

  recordFailure(): BreakerState {
    this.#failures += 1;
    if (this.#state === 'half_open' || this.#failures >= this.threshold) {
      this.#state = 'open';
      this.#openedAt = this.#clock.now();
    }
    return this.#state;
  }

  recordSuccess(): void {
    this.#failures = 0;
    this.#state = 'closed';
  }

  /** Moves open → half-open when the cool-down has passed; returns the (new) state. */
  check(): BreakerState {
    if (this.#state === 'open' && this.#clock.now() - this.#openedAt >= this.cooldownMs) this.#state = 'half_open';
    return this.#state;
  }

  /** Whether a start may be attempted now. */
  allows(): boolean {
    return this.check() !== 'open';
  }
}
