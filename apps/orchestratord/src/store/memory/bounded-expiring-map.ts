import type { Clock } from '@llama-orch/daemon-support';

interface Held<T> {
  readonly value: T;
  readonly expiresAt: number;
}

/** How often, at most, a write past the bound looks for expired entries to drop first, ms. */
const SWEEP_EVERY_MS = 1000;

/**
 * A map of entries that expire (judged by the clock on read) and are bounded in number. Past
 * `maxCount` a write first drops the expired entries (a sweep, at most once a second: a full map of
 * live entries costs no scan per write), then the first inserted; a rewrite of a key keeps its
 * place (Map order). The in-process half of lua/record-put.lua.
 */
export class BoundedExpiringMap<T> {
  readonly #clock: Clock;
  readonly #maxCount: number;
  readonly #entries = new Map<string, Held<T>>();
  #sweptAt = Number.NEGATIVE_INFINITY;

  constructor(clock: Clock, maxCount: number) {
    this.#clock = clock;
    this.#maxCount = maxCount;
  }

  set(key: string, value: T, ttlMs: number): void {
    const now = this.#clock.now();
    this.#entries.set(key, { value, expiresAt: now + ttlMs });
    if (this.#entries.size <= this.#maxCount) return;
    if (now - this.#sweptAt >= SWEEP_EVERY_MS) {
      this.#sweptAt = now;
      for (const [k, held] of this.#entries) if (held.expiresAt <= now) this.#entries.delete(k);
    }
    for (const k of this.#entries.keys()) {
      if (this.#entries.size <= this.#maxCount) break;
      this.#entries.delete(k);
    }
  }

  get(key: string): T | undefined {
    return this.#live(key, this.#clock.now());
  }

  /** Whether a live entry was there. */
  delete(key: string): boolean {
    return this.#live(key, this.#clock.now()) !== undefined && this.#entries.delete(key);
  }

  /** Every live entry, in insertion order (the expired ones are dropped on the way). */
  values(): T[] {
    const now = this.#clock.now();
    const out: T[] = [];
    for (const key of [...this.#entries.keys()]) {
      const value = this.#live(key, now);
      if (value !== undefined) out.push(value);
    }
    return out;
  }

  #live(key: string, now: number): T | undefined {
    const held = this.#entries.get(key);
    if (held === undefined) return undefined;
    if (held.expiresAt > now) return held.value;
    this.#entries.delete(key);
    return undefined;
  }
}
