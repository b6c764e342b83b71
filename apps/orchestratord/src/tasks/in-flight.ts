/**
 * Counts the dispatch attempts in flight and lets close() wait until none is left. A count and the
 * waiters of `idle()` rather than a Set of the attempts' promises: an attempt lasts as long as its
 * token stream, and a tracked promise (with the `finally` that removed it) was ~0.5 KB per stream
 * (performance notes: attempts settled by one callback).
 */
export class InFlight {
  #count = 0;
  #waiters: Array<() => void> = [];

  get size(): number {
    return this.#count;
  }

  started(): void {
    this.#count += 1;
  }

  ended(): void {
    this.#count -= 1;
    if (this.#count > 0) return;
    const waiters = this.#waiters;
    this.#waiters = [];
    for (const resolve of waiters) resolve();
  }

  /**
   * Resolves once nothing is in flight (at once when nothing is), or after `maxMs` at the latest
   * (close() must finish even when an upstream request never unwinds).
   */
  idle(maxMs = Number.POSITIVE_INFINITY): Promise<void> {
    if (this.#count === 0) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = Number.isFinite(maxMs) ? setTimeout(resolve, maxMs) : undefined;
      timer?.unref();
      this.#waiters.push(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }
}
