/**
 * Order statistics for benchmark samples. Percentiles use the nearest-rank method on a sorted
 * copy (no interpolation): p99 of 200 samples is the 198th smallest, an observed value.
 */

export interface Summary {
  readonly n: number;
  readonly min: number;
  readonly p50: number;
  readonly p90: number;
  readonly p99: number;
  readonly max: number;
  readonly mean: number;
}

export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))] as number;
}

export function summarize(values: readonly number[]): Summary {
  const sorted = [...values].sort((a, b) => a - b);
  const n = sorted.length;
  let sum = 0;
  for (const v of sorted) sum += v;
  return {
    n,
    min: n === 0 ? Number.NaN : (sorted[0] as number),
    p50: percentile(sorted, 50),
    p90: percentile(sorted, 90),
    p99: percentile(sorted, 99),
    max: n === 0 ? Number.NaN : (sorted[n - 1] as number),
    mean: n === 0 ? Number.NaN : sum / n,
  };
}

export function median(values: readonly number[]): number {
  return summarize(values).p50;
}

/** Rounds for reports: 3 significant decimals below 10, fewer above. */
export function round(value: number, digits = 3): number {
  if (!Number.isFinite(value)) return value;
  const f = 10 ** digits;
  return Math.round(value * f) / f;
}

/** A Summary with every field rounded, for JSON output. */
export function rounded(s: Summary, digits = 3): Summary {
  return {
    n: s.n,
    min: round(s.min, digits),
    p50: round(s.p50, digits),
    p90: round(s.p90, digits),
    p99: round(s.p99, digits),
    max: round(s.max, digits),
    mean: round(s.mean, digits),
  };
}
