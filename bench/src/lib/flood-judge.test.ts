import { describe, expect, it } from 'vitest';
import { judgeFlood } from './flood-judge.js';

describe('judgeFlood', () => {
  // Ten tasks admitted at t = 0..9 ms, ending one every 100 ms from 100 ms: gap 100 ms, service 100 ms.
  const admitted = Array.from({ length: 10 }, (_, i) => ({ admittedAt: i, endedAt: 100 * (i + 1) }));

  it('counts refusals that fit behind the admitted tasks, each queued behind the previous one', () => {
    // Deadline 1,300 ms: behind the last task (ends 1,000) there is room for three more (1,100, 1,200, 1,300 − t).
    const v = judgeFlood(admitted, [10, 11, 12, 13, 14], 1300);
    expect(v.gapMs).toBe(100);
    expect(v.serviceMs).toBe(100);
    expect(v.verdicts.map((x) => x.wouldEndAt)).toEqual([1100, 1200, 1300, 1400, 1400]);
    expect(v.verdicts.map((x) => x.wouldHaveMet)).toEqual([true, true, true, false, false]);
    expect(v.falseRefusals).toBe(3);
  });

  it('delays the admitted tasks behind a refusal it puts back', () => {
    // A refusal at 4.5 ms goes behind task 4 (ends 500 → 600); task 5 then ends one gap later (700), so the
    // refusal at 20 ms lands at 1,100 + 100.
    const v = judgeFlood(admitted, [4.5, 20], 10_000);
    expect(v.verdicts.map((x) => x.wouldEndAt)).toEqual([600, 1200]);
    expect(v.falseRefusals).toBe(2);
  });

  it('counts nothing behind an admitted task that did not end normally, nor past the deadline', () => {
    const expired = [...admitted.slice(0, 9), { admittedAt: 9, endedAt: undefined }];
    expect(judgeFlood(expired, [10, 11], 10_000).falseRefusals).toBe(0);
    expect(judgeFlood(admitted, [10], 1000).falseRefusals).toBe(0);
  });

  it('judges a refusal before any admission against an empty queue', () => {
    expect(judgeFlood(admitted, [-5], 200).verdicts[0]).toEqual({ refusedAt: -5, wouldEndAt: 95, wouldHaveMet: true });
    expect(judgeFlood([], [0], 1000)).toMatchObject({ falseRefusals: 1, gapMs: 0 });
  });
});
