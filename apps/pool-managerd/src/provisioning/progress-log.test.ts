import { describe, expect, it } from 'vitest';
import { ProgressLogThrottle } from './progress-log.js';

describe('ProgressLogThrottle', () => {
  it('logs the first figures, then only moves of 5 points or more', () => {
    const t = new ProgressLogThrottle(() => 0);
    expect([0, 2, 4, 5, 9, 11, 15].map((p) => t.due([p, 0]))).toEqual([true, false, false, true, false, true, false]);
  });

  it('a figure reaching 100 is always logged, once', () => {
    const t = new ProgressLogThrottle(() => 0);
    expect([97, 100, 100].map((p) => t.due([p]))).toEqual([true, true, false]);
  });

  it('watches every figure: the second one moving is news too', () => {
    const t = new ProgressLogThrottle(() => 0);
    t.due([50, 0]);
    expect(t.due([51, 6])).toBe(true);
  });

  it('an unchanged figure gets a line every 10 s, not before', () => {
    let now = 0;
    const t = new ProgressLogThrottle(() => now);
    t.due([40]);
    now = 9_999;
    expect(t.due([40])).toBe(false);
    now = 10_000;
    expect(t.due([40])).toBe(true);
  });
});
