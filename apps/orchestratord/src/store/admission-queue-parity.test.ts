import { describe, expect, it } from 'vitest';
import { AdmissionQueue, type QueuePolicy } from '../admission/admission-queue.js';
import { STORE_KINDS, storeHarness } from '../testing/store-harness.js';
import { admission, admissionView } from '../testing/store-steps.js';
import type { QueueLane } from './admission-queue-store.js';

/** mulberry32: seeded, so a failure replays. */
function rng(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const GROUPS = ['m1', 'm2', 'm3'];

// The cluster's queue, as the task lifecycle steps reach it, must answer exactly as the in-process
// AdmissionQueue does (the local coordinator's), so that one process and a cluster order tasks
// alike: the same random operations on both, step by step — admissions (position, eviction, the
// count ahead), dispatches (only the first of a model), requeues at the front, removals, sizes.
describe.each(STORE_KINDS)('the store queue answers as admission/AdmissionQueue (%s store)', (kind) => {
  const h = storeHarness(kind);

  it.each([
    ['reject', 1],
    ['drop-lru', 2],
    ['drop-lru', 3],
  ] as const)('%s, seed %i: 600 random operations', async (policy: QueuePolicy, seed: number) => {
    const [store] = await h.open(1, { admission_capacity: 8, admission_policy: policy });
    const s = store!;
    const reference = new AdmissionQueue<{ group: string }>({ capacity: 8, policy, groupOf: (i) => i.group });
    const random = rng(seed);
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)] as T;
    let next = 0;
    const known: string[] = [];
    /** Dispatched, not requeued: what a requeue may put back. */
    const running = new Map<string, { lane: QueueLane; group: string }>();
    for (let step = 0; step < 600; step += 1) {
      const r = random();
      const where = `step ${step}`;
      if (r < 0.4) {
        const id = `t${next++}`;
        known.push(id);
        const lane: QueueLane = random() < 0.4 ? 'interactive' : 'batch';
        const group = pick(GROUPS);
        const ahead = reference.countAhead(group, lane);
        const want = reference.enqueue(id, lane, { group });
        const got = await s.lifecycle.admit({
          ...admission(id, 'A', { lane, group, ttlMs: 600_000 }),
          entry: { lane, group, payload: id },
        });
        if (want.kind === 'full') expect(got, where).toMatchObject({ kind: 'full', policy, view: { ahead } });
        else
          expect(
            {
              kind: got.kind,
              position: got.kind === 'queued' ? got.position : -1,
              evicted: got.kind === 'queued' ? got.evicted?.id : undefined,
              ahead: got.kind === 'queued' ? got.view.ahead : -1,
            },
            where,
          ).toEqual({ kind: 'queued', position: want.position, evicted: want.evicted?.id, ahead });
      } else if (r < 0.5 && running.size > 0) {
        const id = pick([...running.keys()]);
        const { lane, group } = running.get(id)!;
        running.delete(id);
        reference.requeueFront(id, lane, { group });
        expect(await s.lifecycle.requeue({ id, fence: 1, entry: { lane, group, payload: id } }), where).toMatchObject({
          ok: true,
        });
      } else if (r < 0.75 && known.length > 0) {
        const id = pick(known);
        const entry = reference.get(id);
        const got = await s.lifecycle.dispatch(id, 1, 'p');
        if (entry === undefined) expect(got, where).toEqual({ kind: 'absent' });
        else {
          const first = reference.find((e) => e.item.group === entry.item.group)!;
          if (first.id !== id) expect(got, where).toEqual({ kind: 'behind', first: first.id });
          else {
            expect(got, where).toMatchObject({
              kind: 'taken',
              entry: { id, lane: entry.lane, group: entry.item.group },
            });
            reference.remove(id);
            running.set(id, { lane: entry.lane, group: entry.item.group });
          }
        }
      } else if (r < 0.85 && known.length > 0) {
        const id = pick(known);
        expect((await s.queue.remove(id))?.id, where).toBe(reference.remove(id)?.id);
      } else if (r < 0.95) {
        expect(await h.queued(s), where).toEqual([...reference].map((e) => e.id));
      } else {
        const group = pick(GROUPS);
        const lane: QueueLane = random() < 0.5 ? 'interactive' : 'batch';
        expect((await admissionView(s, 'viewer', group, lane)).ahead, where).toBe(reference.countAhead(group, lane));
        expect(await s.queue.sizes(), where).toEqual({
          interactive: reference.sizeOf('interactive'),
          batch: reference.sizeOf('batch'),
        });
      }
    }
    expect(await h.queued(s)).toEqual(reference.drain().map((e) => e.id));
  });
});
