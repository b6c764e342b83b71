import { describe, expect, it } from 'vitest';
import { RestartBudget } from './restart-budget.js';

describe('RestartBudget', () => {
  const policy = { initialMs: 500, maxMs: 3000, maxRestarts: 4, windowMs: 60_000 };

  it('doubles the delay per restart in the window, capped, then refuses', () => {
    let now = 0;
    const b = new RestartBudget(policy, () => now);
    const delays = [1, 2, 3, 4].map(() => {
      now += 1000;
      return b.next();
    });
    expect(delays).toEqual([500, 1000, 2000, 3000]);
    expect(b.next()).toBeUndefined();
  });

  it('starts again from the first delay once the earlier restarts left the window', () => {
    let now = 0;
    const b = new RestartBudget(policy, () => now);
    for (let i = 0; i < 4; i += 1) b.next();
    now += 60_000;
    expect(b.next()).toBe(500);
  });
});
