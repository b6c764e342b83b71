import { describe, expect, it } from 'vitest';
import { systemClock } from './clock.js';

describe('systemClock', () => {
  it('sleeps, and an abort rejects with its reason', async () => {
    const t0 = systemClock.now();
    await systemClock.sleep(20);
    expect(systemClock.now() - t0).toBeGreaterThanOrEqual(15);
    const c = new AbortController();
    const slept = systemClock.sleep(60_000, c.signal);
    c.abort(new Error('stop'));
    await expect(slept).rejects.toThrow('stop');
    await expect(systemClock.sleep(1, AbortSignal.abort(new Error('already')))).rejects.toThrow('already');
  });
});
