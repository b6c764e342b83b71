import { describe, expect, it } from 'vitest';
import { InFlight } from './in-flight.js';

describe('InFlight', () => {
  it('idle() resolves at once with nothing in flight, else when the last one ends', async () => {
    const f = new InFlight();
    await f.idle();
    f.started();
    f.started();
    let idle = false;
    const waiting = f.idle().then(() => {
      idle = true;
    });
    f.ended();
    await Promise.resolve();
    expect([f.size, idle]).toEqual([1, false]);
    f.ended();
    await waiting;
    expect([f.size, idle]).toEqual([0, true]);
    f.started();
    const again = f.idle();
    f.ended();
    await again;
  });

  it('idle(maxMs) gives up waiting after maxMs', async () => {
    const f = new InFlight();
    f.started();
    const t0 = performance.now();
    await f.idle(30);
    expect(performance.now() - t0).toBeGreaterThanOrEqual(25);
    expect(f.size).toBe(1);
    f.ended();
  });
});
