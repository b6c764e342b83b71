/** Fewest points a figure moves before it is logged again. */
const MIN_POINTS = 5;
/** Longest a provisioning in progress goes without a line, ms. */
const MAX_SILENCE_MS = 10_000;

/**
 * When a progress figure (percentages) is worth a log line: off a terminal each line is read
 * later, so a line must say something new. Logs the first figures, any move of ≥ 5 points, a
 * figure reaching 100, and otherwise one line every 10 s so that a slow step still shows life.
 */
export class ProgressLogThrottle {
  readonly #now: () => number;
  #last: readonly number[] | undefined;
  #at = 0;

  constructor(now: () => number = Date.now) {
    this.#now = now;
  }

  /** Whether `figures` (0..100 each) get a line now; if so they become the reference. */
  due(figures: readonly number[]): boolean {
    const now = this.#now();
    const last = this.#last;
    const due =
      last === undefined ||
      figures.some((f, i) => Math.abs(f - (last[i] ?? 0)) >= MIN_POINTS || (f === 100 && last[i] !== 100)) ||
      now - this.#at >= MAX_SILENCE_MS;
    if (due) {
      this.#last = [...figures];
      this.#at = now;
    }
    return due;
  }
}
