import { describe, expect, it } from 'vitest';
import { parseCpuStat } from './cpu-cap.js';

describe('parseCpuStat', () => {
  it('reads cgroup v1 counters (throttled_time in ns)', () => {
    expect(
      parseCpuStat('nr_periods 34\nnr_throttled 30\nthrottled_time 2064827287\nnr_bursts 0\nburst_time 0\n'),
    ).toEqual({
      periods: 34,
      throttled: 30,
      throttled_s: 2.064827287,
    });
  });
  it('reads cgroup v2 counters (throttled_usec in µs)', () => {
    expect(
      parseCpuStat(
        'usage_usec 500\nuser_usec 400\nsystem_usec 100\nnr_periods 10\nnr_throttled 4\nthrottled_usec 250000\n',
      ),
    ).toEqual({
      periods: 10,
      throttled: 4,
      throttled_s: 0.25,
    });
  });
});
