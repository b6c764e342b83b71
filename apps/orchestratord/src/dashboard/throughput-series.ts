import type { ThroughputPoint } from '@llama-orch/contracts';
import type { ThroughputContribution } from '../store/activity-store.js';

export interface ThroughputSeriesOptions {
  /** Width of a bucket, ms; buckets start at multiples of it (ms since the epoch). */
  bucketMs: number;
  /** Closed buckets kept (the oldest go first). */
  buckets: number;
  /** Now, ms since the epoch: the first bucket is the one holding it. */
  now: number;
  /** The cumulative tokens-relayed count now. */
  tokens: number;
  /** Most first-token times kept per bucket for its median (a uniform sample beyond that). @default 2048 */
  ttftSamples?: number;
  /** Source of randomness for the sample. @default Math.random */
  random?: () => number;
}

interface OpenBucket {
  start: number;
  ttfts: number[];
  /** First-token times seen in the bucket (≥ `ttfts.length` once sampling). */
  seen: number;
  ended: number;
}

/**
 * The live throughput chart's data: fixed-width buckets, oldest first, only closed ones (a bucket
 * in progress would show a rate over part of its width as if over all of it). Tokens per second
 * come from a cumulative counter sampled when a bucket closes — the difference to the previous
 * sample over the bucket's width — so nothing is counted per token. A bucket closes when the
 * caller advances past its end (the feed's timer fires at each boundary; events advance lazily),
 * so a late close moves a few tokens into the bucket it closes rather than losing them.
 */
export class ThroughputSeries {
  readonly bucketMs: number;
  readonly #capacity: number;
  readonly #maxSamples: number;
  readonly #random: () => number;
  readonly #closed: ThroughputPoint[] = [];
  /** Closed buckets with anything in them, not yet taken by {@link drain}. */
  #undrained: ThroughputContribution[] = [];
  #open: OpenBucket;
  #lastTokens: number;

  constructor(o: ThroughputSeriesOptions) {
    if (!Number.isInteger(o.bucketMs) || o.bucketMs < 1) throw new RangeError('bucketMs must be an integer >= 1');
    if (!Number.isInteger(o.buckets) || o.buckets < 1) throw new RangeError('buckets must be an integer >= 1');
    this.bucketMs = o.bucketMs;
    this.#capacity = o.buckets;
    this.#maxSamples = o.ttftSamples ?? 2048;
    this.#random = o.random ?? Math.random;
    this.#open = this.#bucketAt(o.now);
    this.#lastTokens = o.tokens;
  }

  /** Start of the bucket in progress, ms since the epoch: every bucket before it is closed. */
  get openSince(): number {
    return this.#open.start;
  }

  /** End of the bucket in progress, ms since the epoch: when {@link advance} next closes one. */
  get openUntil(): number {
    return this.#open.start + this.bucketMs;
  }

  /**
   * Closes every bucket that ended by `now`. `tokens()` (the cumulative count) is read only when
   * one closes; the first closed bucket gets the tokens since the last close, buckets skipped
   * entirely (no event, no timer) get none. Returns whether any bucket closed.
   */
  advance(now: number, tokens: () => number): boolean {
    if (now < this.openUntil) return false;
    const total = tokens();
    let delta = Math.max(0, total - this.#lastTokens);
    this.#lastTokens = Math.max(total, this.#lastTokens);
    const nextStart = this.#startOf(now);
    while (this.#open.start < nextStart) {
      this.#close(this.#open, delta);
      delta = 0;
      const following = this.#open.start + this.bucketMs;
      // Past a full window of empty buckets only the last `capacity` matter.
      const skipTo = nextStart - this.#capacity * this.bucketMs;
      this.#open = { start: following < skipTo ? skipTo : following, ttfts: [], seen: 0, ended: 0 };
    }
    return true;
  }

  /** A first token at `now` (call {@link advance} first), `ttftMs` after its task's admission. */
  firstToken(ttftMs: number): void {
    const b = this.#open;
    b.seen += 1;
    if (b.ttfts.length < this.#maxSamples) {
      b.ttfts.push(ttftMs);
      return;
    }
    // Reservoir sampling: every first token of the bucket is in the sample with equal probability.
    const i = Math.floor(this.#random() * b.seen);
    if (i < this.#maxSamples) b.ttfts[i] = ttftMs;
  }

  /** A task ended now (call {@link advance} first). */
  taskEnded(): void {
    this.#open.ended += 1;
  }

  /**
   * The buckets closed since the last call that saw any token, first token or end (oldest first, at
   * most `buckets`): this replica's contributions to the cluster's series.
   */
  drain(): ThroughputContribution[] {
    const out = this.#undrained;
    this.#undrained = [];
    return out;
  }

  /** Closed buckets, oldest first (a copy). */
  points(): ThroughputPoint[] {
    return [...this.#closed];
  }

  #close(b: OpenBucket, tokens: number): void {
    const point: ThroughputPoint = {
      t_ms: b.start,
      tokens_per_s: (tokens * 1000) / this.bucketMs,
      tasks_ended: b.ended,
    };
    const p50 = median(b.ttfts);
    if (p50 !== undefined) point.ttft_p50_ms = p50;
    this.#closed.push(point);
    if (this.#closed.length > this.#capacity) this.#closed.splice(0, this.#closed.length - this.#capacity);
    if (tokens > 0 || b.ended > 0 || b.seen > 0) {
      this.#undrained.push({
        t_ms: b.start,
        tokens,
        tasks_ended: b.ended,
        ttft_count: b.seen,
        ...(p50 !== undefined ? { ttft_p50_ms: p50 } : {}),
      });
      if (this.#undrained.length > this.#capacity) this.#undrained.splice(0, this.#undrained.length - this.#capacity);
    }
  }

  #startOf(t: number): number {
    return Math.floor(t / this.bucketMs) * this.bucketMs;
  }

  #bucketAt(t: number): OpenBucket {
    return { start: this.#startOf(t), ttfts: [], seen: 0, ended: 0 };
  }
}

/** Median (mean of the two middle values for an even count); undefined for none. */
export function median(values: readonly number[]): number | undefined {
  if (values.length === 0) return undefined;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1
    ? (sorted[mid] as number)
    : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
}
