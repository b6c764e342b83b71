import { describe, expect, it } from 'vitest';
import { sparklinePath, summarize } from './chart.js';

describe('sparklinePath', () => {
  it('spreads values across the width and scales the peak to the top', () => {
    expect(sparklinePath([0, 5, 10], 100, 22, 1)).toBe('M0,21 L50,11 L100,1');
  });

  it('breaks the line at a gap and draws a lone point as a dot', () => {
    expect(sparklinePath([4, undefined, 2, 4], 30, 12, 2)).toBe('M0,2h0 M20,6 L30,2');
  });

  it('keeps an all-zero series on the baseline and handles one or no value', () => {
    expect(sparklinePath([0, 0], 10, 10, 0)).toBe('M0,10 L10,10');
    expect(sparklinePath([7], 10, 10, 0)).toBe('M5,0h0');
    expect(sparklinePath([], 10, 10)).toBe('');
    expect(sparklinePath([undefined, undefined], 10, 10)).toBe('');
  });
});

describe('summarize', () => {
  it('latest, peak and mean of the values present', () => {
    expect(summarize([1, undefined, 5, 3])).toEqual({ latest: 3, peak: 5, mean: 3, count: 3 });
    expect(summarize([undefined])).toEqual({ latest: undefined, peak: undefined, mean: undefined, count: 0 });
  });
});
