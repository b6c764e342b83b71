import { describe, expect, it } from 'vitest';
import { median, ThroughputSeries } from './throughput-series.js';

const T0 = 1_700_000_000_000; // a multiple of 1000

describe('ThroughputSeries', () => {
  it('closes buckets at their end: tokens/s from the cumulative count, median TTFT, tasks ended', () => {
    let tokens = 100; // tokens relayed before the series started do not count
    const s = new ThroughputSeries({ bucketMs: 1000, buckets: 10, now: T0 + 250, tokens });
    expect(s.openUntil).toBe(T0 + 1000);
    expect(s.advance(T0 + 999, () => tokens)).toBe(false);
    s.firstToken(30);
    s.firstToken(10);
    s.firstToken(20);
    s.taskEnded();
    tokens += 40;
    expect(s.points()).toEqual([]); // the bucket in progress is never shown
    expect(s.advance(T0 + 1000, () => tokens)).toBe(true);
    expect(s.points()).toEqual([{ t_ms: T0, tokens_per_s: 40, ttft_p50_ms: 20, tasks_ended: 1 }]);
    tokens += 5;
    s.advance(T0 + 2000, () => tokens);
    // No first token in the bucket: no median.
    expect(s.points()[1]).toEqual({ t_ms: T0 + 1000, tokens_per_s: 5, tasks_ended: 0 });
  });

  it('reads the counter only when a bucket closes, and gives skipped buckets no tokens', () => {
    let reads = 0;
    let tokens = 0;
    const read = () => {
      reads += 1;
      return tokens;
    };
    const s = new ThroughputSeries({ bucketMs: 500, buckets: 10, now: T0, tokens });
    for (let i = 0; i < 100; i += 1) s.advance(T0 + i, read);
    expect(reads).toBe(0);
    tokens = 50;
    s.advance(T0 + 1600, read); // three buckets ended since the last close
    expect(reads).toBe(1);
    expect(s.points().map((p) => [p.t_ms - T0, p.tokens_per_s])).toEqual([
      [0, 100],
      [500, 0],
      [1000, 0],
    ]);
  });

  it('keeps the last `buckets` closed buckets, and jumps over a long silence', () => {
    const s = new ThroughputSeries({ bucketMs: 100, buckets: 3, now: T0, tokens: 0 });
    s.advance(T0 + 500, () => 0);
    expect(s.points().map((p) => p.t_ms - T0)).toEqual([200, 300, 400]);
    s.advance(T0 + 1_000_000_000, () => 7);
    expect(s.points().map((p) => p.t_ms - T0)).toEqual([999_999_700, 999_999_800, 999_999_900]);
  });

  it('never reports negative rates, and a uniform sample bounds the TTFT memory of a bucket', () => {
    let tokens = 10;
    let r = 0;
    const s = new ThroughputSeries({
      bucketMs: 1000,
      buckets: 5,
      now: T0,
      tokens,
      ttftSamples: 4,
      random: () => (r = (r + 0.37) % 1),
    });
    for (let i = 0; i < 1000; i += 1) s.firstToken(i < 500 ? 1 : 3);
    tokens = 3;
    s.advance(T0 + 1000, () => tokens);
    const [p] = s.points();
    expect(p?.tokens_per_s).toBe(0);
    expect([1, 2, 3]).toContain(p?.ttft_p50_ms);
  });

  it('median of odd and even counts', () => {
    expect(median([])).toBeUndefined();
    expect(median([5, 1, 3])).toBe(3);
    expect(median([4, 1, 3, 2])).toBe(2.5);
  });
});
