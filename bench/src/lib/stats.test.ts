import { describe, expect, it } from 'vitest';
import { percentile, summarize } from './stats.js';

describe('summarize', () => {
  it('uses nearest-rank percentiles (observed values, no interpolation)', () => {
    const xs = Array.from({ length: 200 }, (_, i) => i + 1);
    const s = summarize(xs);
    expect(s.p50).toBe(100);
    expect(s.p99).toBe(198);
    expect(s.max).toBe(200);
    expect(s.min).toBe(1);
    expect(s.mean).toBeCloseTo(100.5);
  });

  it('does not depend on input order and does not mutate it', () => {
    const xs = [5, 1, 4, 2, 3];
    expect(summarize(xs).p50).toBe(3);
    expect(xs).toEqual([5, 1, 4, 2, 3]);
  });

  it('gives NaN for no samples, so an empty run can never meet a target', () => {
    expect(Number.isNaN(summarize([]).p99)).toBe(true);
    expect(Number.isNaN(percentile([], 50))).toBe(true);
  });
});
