import { describe, expect, it } from 'vitest';
import { SessionStore } from '../../sessions/session-store.js';
import { ManualClock } from '../test-helpers.js';
import { ReferenceSessions } from './reference-sessions.js';

function rng(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// The reference model's sessions answer as sessions/SessionStore (one process's, the local
// coordinator's) on one manual clock (TTL expiry, eviction past maxSessions, budgets, affinity):
// a session behaves alike in one process and in a cluster.
describe('ReferenceSessions answers as sessions/SessionStore', () => {
  it.each([1, 2, 3])('seed %i: 1500 random operations', async (seed) => {
    const clock = new ManualClock();
    const limits = { ttlMs: 1000, maxSessions: 6, tokenBudget: 50 };
    const reference = new SessionStore({ ...limits, clock });
    const store = new ReferenceSessions(limits, clock);
    const random = rng(seed);
    const ids = Array.from({ length: 10 }, (_, i) => `s${i}`);
    const pick = () => ids[Math.floor(random() * ids.length)] as string;
    try {
      for (let step = 0; step < 1500; step += 1) {
        const r = random();
        const id = pick();
        const where = `step ${step} ${id}`;
        if (r < 0.3) {
          reference.taskStarted(id);
          store.startedNow(id);
        } else if (r < 0.55) {
          const tokens = random() < 0.8 ? Math.floor(random() * 10) : undefined;
          const pool = random() < 0.7 ? { node_id: 'n', pool_id: `p${Math.floor(random() * 3)}` } : undefined;
          reference.taskEnded(id, tokens, pool);
          store.endedNow(id, tokens, pool);
        } else if (r < 0.6) {
          expect(await store.delete(id), where).toBe(reference.delete(id));
        } else if (r < 0.75) {
          clock.advance(Math.floor(random() * 400));
        } else {
          expect(await store.get(id), where).toEqual(reference.get(id));
          expect(store.lastPoolNow(id), where).toEqual(reference.lastPool(id));
          expect(store.budgetRemainingNow(id), where).toBe(reference.budgetRemaining(id));
        }
      }
    } finally {
      await reference.close();
    }
  });
});
