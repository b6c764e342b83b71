import { describe, expect, it } from 'vitest';
import { BackoffPolicy } from './backoff.js';
import { CircuitBreaker } from './circuit-breaker.js';
import { RestartLimiter } from './restart-limiter.js';

describe('BackoffPolicy', () => {
  it('doubles from 1 s and caps at 60 s without jitter', () => {
    const b = new BackoffPolicy({ random: () => 0.5 });
    const seq = Array.from({ length: 9 }, () => b.next());
    expect(seq).toEqual([1000, 2000, 4000, 8000, 16000, 32000, 60000, 60000, 60000]);
    b.reset();
    expect(b.next()).toBe(1000);
  });

  it('jitters within ±10 % and never above the cap', () => {
    expect(new BackoffPolicy({ random: () => 0 }).next()).toBe(900);
    expect(new BackoffPolicy({ random: () => 0.999999 }).next()).toBe(1100);
    const capped = new BackoffPolicy({ random: () => 0.999999, baseMs: 60_000 });
    expect(capped.next()).toBe(60_000);
  });
});

describe('CircuitBreaker', () => {
  it('opens after 5 consecutive failures, half-opens after the cool-down, re-opens on a trial failure', () => {
    let now = 0;
    const c = new CircuitBreaker({ clock: { now: () => now } });
    for (let i = 0; i < 4; i++) expect(c.recordFailure()).toBe('closed');
    expect(c.recordFailure()).toBe('open');
    expect(c.allows()).toBe(false);
    expect(c.retryAt).toBe(300_000);
    now = 299_999;
    expect(c.check()).toBe('open');
    now = 300_000;
    expect(c.check()).toBe('half_open');
    expect(c.allows()).toBe(true);
    expect(c.recordFailure()).toBe('open');
    now = 600_000;
    c.check();
    c.recordSuccess();
    expect(c.state).toBe('closed');
    expect(c.failures).toBe(0);
  });
});

describe('RestartLimiter', () => {
  it('bounds restarts per sliding window', () => {
    let now = 0;
    const l = new RestartLimiter({ max: 3, windowMs: 1000, clock: { now: () => now } });
    l.record();
    now = 100;
    l.record();
    now = 200;
    expect(l.waitMs()).toBe(0);
    l.record();
    expect(l.waitMs()).toBe(800); // the restart at t=0 leaves the window at t=1000
    now = 999;
    expect(l.waitMs()).toBe(1);
    now = 1000;
    expect(l.waitMs()).toBe(0);
    l.record();
    expect(l.waitMs()).toBe(100); // now the restart at t=100 is the oldest of three
  });
});
