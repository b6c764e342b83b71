export interface BackoffOptions {
  /** First delay, ms. @default 1000 */
  baseMs?: number;
  /** Largest delay, ms. @default 60000 */
  maxMs?: number;
  /** Relative jitter, uniform in ±jitter. @default 0.1 */
  jitter?: number;
  /** Random source in [0, 1). @default Math.random */
  random?: () => number;
}

/**
 * Exponential backoff: the n-th consecutive failure waits `base · 2^(n-1)`, capped at `max`, with
 * ±10 % jitter (so restarts of many pools do not align), still capped at `max`.
 */
export class BackoffPolicy {
  readonly baseMs: number;
  readonly maxMs: number;
  readonly #jitter: number;
  readonly #random: () => number;
  #attempt = 0;

  constructor(options: BackoffOptions = {}) {
    this.baseMs = options.baseMs ?? 1000;
    this.maxMs = options.maxMs ?? 60_000;
    this.#jitter = options.jitter ?? 0.1;
    this.#random = options.random ?? Math.random;
  }

  /** Failures counted since the last reset. */
  get attempt(): number {
    return this.#attempt;
  }

  /** Counts a failure and returns the delay before the next try, ms. */
  next(): number {
    this.#attempt += 1;
    const exp = Math.min(this.#attempt - 1, 30);
    const raw = Math.min(this.baseMs * 2 ** exp, this.maxMs);
    const jittered = raw * (1 + (this.#random() * 2 - 1) * this.#jitter);
    return Math.max(0, Math.min(Math.round(jittered), this.maxMs));
  }

  reset(): void {
    this.#attempt = 0;
  }
}
