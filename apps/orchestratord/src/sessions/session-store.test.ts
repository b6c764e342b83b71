import { afterEach, describe, expect, it } from 'vitest';
import { SessionStore } from './session-store.js';
import { ManualClock } from '../testing/test-helpers.js';

describe('SessionStore', () => {
  const stores: SessionStore[] = [];
  const make = (clock: ManualClock, maxSessions: number, onEvict?: () => void) => {
    const s = new SessionStore({
      ttlMs: 60_000,
      maxSessions,
      tokenBudget: 100,
      clock,
      ...(onEvict !== undefined ? { onEvict } : {}),
    });
    stores.push(s);
    return s;
  };
  afterEach(async () => {
    await Promise.all(stores.splice(0).map((s) => s.close()));
  });

  it('a flood of unique sessions stays at the cap: the least recently active idle session goes first', () => {
    const clock = new ManualClock();
    let evicted = 0;
    const s = make(clock, 3, () => {
      evicted += 1;
    });
    for (const id of ['a', 'b', 'c']) {
      s.taskStarted(id);
      s.taskEnded(id, 5);
      clock.advance(10);
    }
    s.taskStarted('a'); // a is now the most recently active (and busy)
    s.taskEnded('a', 5);
    s.taskStarted('d'); // full: b is the oldest idle
    expect(s.get('b')).toBeUndefined();
    expect(s.get('a')).toMatchObject({ turns: 2, tokens_out: 10 });
    expect(evicted).toBe(1);
    for (let i = 0; i < 1000; i++) s.taskStarted(`flood-${i}`);
    expect(s.size).toBe(1 + 1000); // a and c made room; d and the flood are active: none of them could go
    for (let i = 0; i < 1000; i++) s.taskEnded(`flood-${i}`, 1);
    s.taskStarted('e'); // the flood is idle now: back under the cap at once
    s.taskEnded('e', 1);
    expect(s.size).toBe(3);
    expect(s.get('d')).toMatchObject({ active_tasks: 1 });
    for (let i = 0; i < 1000; i++) {
      s.taskStarted(`idle-${i}`);
      s.taskEnded(`idle-${i}`, 1);
    }
    expect(s.size).toBe(3); // each new session replaced the oldest idle one
    // Sessions with an active task are never evicted, however old.
    s.taskStarted('busy');
    for (let i = 0; i < 2000; i++) {
      s.taskStarted(`more-${i}`);
      s.taskEnded(`more-${i}`, 1);
    }
    expect(s.get('busy')).toMatchObject({ active_tasks: 1 });
    expect(s.get('d')).toMatchObject({ active_tasks: 1 });
    expect(s.size).toBe(3);
  });

  it('keeps at most maxSessions idle sessions and counts each eviction once', () => {
    const clock = new ManualClock();
    let evicted = 0;
    const s = make(clock, 100, () => {
      evicted += 1;
    });
    for (let i = 0; i < 10_000; i++) {
      s.taskStarted(`s-${i}`);
      s.taskEnded(`s-${i}`, 1);
    }
    expect(s.size).toBe(100);
    expect(evicted).toBe(9_900);
    expect(s.get('s-9999')).toMatchObject({ turns: 1 });
    expect(s.get('s-0')).toBeUndefined();
  });
});
