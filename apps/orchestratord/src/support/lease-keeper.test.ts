import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { LeaseKeeper } from './lease-keeper.js';

describe('the lease keeper (one renewal loop for every lease a process holds)', () => {
  it('renews every holder on each tick, stops one that leaves, and stops all on close', async () => {
    const keeper = new LeaseKeeper({ periodMs: 20 });
    const counts = { tasks: 0, slots: 0 };
    keeper.keep({ renewHeld: () => void (counts.tasks += 1) });
    const stopSlots = keeper.keep({ renewHeld: () => void (counts.slots += 1) });
    await sleep(110);
    expect(counts.tasks).toBeGreaterThanOrEqual(3);
    expect(Math.abs(counts.tasks - counts.slots)).toBeLessThanOrEqual(1);
    stopSlots();
    const slotsThen = counts.slots;
    await sleep(60);
    expect(counts.slots).toBe(slotsThen);
    await keeper.close();
    await keeper.close();
    expect(keeper.state).toBe('closed');
    const tasksThen = counts.tasks;
    await sleep(60);
    expect(counts.tasks).toBe(tasksThen);
  });
});
