import { describe, expect, it } from 'vitest';
import { AdmissionQueue, type QueuePolicy } from '../admission/admission-queue.js';
import { STORE_KINDS, storeHarness } from '../testing/store-harness.js';
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

// The store's queue must answer exactly as today's in-process AdmissionQueue does, so that the
// request path can swap one for the other: the same random operations on both, step by step.
describe.each(STORE_KINDS)('admission queue store answers as admission/AdmissionQueue (%s store)', (kind) => {
  const h = storeHarness(kind);

  it.each([
    ['reject', 1],
    ['drop-lru', 2],
    ['drop-lru', 3],
  ] as const)('%s, seed %i: 600 random operations', async (policy: QueuePolicy, seed: number) => {
    const [store] = await h.open(1, { admission_capacity: 8, admission_policy: policy });
    const queue = store!.queue;
    const reference = new AdmissionQueue<{ group: string }>({ capacity: 8, policy, groupOf: (i) => i.group });
    const random = rng(seed);
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)] as T;
    let next = 0;
    const known: string[] = [];
    for (let step = 0; step < 600; step += 1) {
      const r = random();
      const where = `step ${step}`;
      if (r < 0.4) {
        const id = `t${next++}`;
        known.push(id);
        const lane: QueueLane = random() < 0.4 ? 'interactive' : 'batch';
        const group = pick(GROUPS);
        const want = reference.enqueue(id, lane, { group });
        const got = await queue.add({ id, lane, group, payload: id });
        if (want.kind === 'full') expect(got, where).toEqual({ kind: 'full', policy });
        else
          expect({ kind: got.kind, position: got.kind === 'queued' ? got.position : -1, evicted: got.kind === 'queued' ? got.evicted?.id : undefined }, where).toEqual({
            kind: 'queued',
            position: want.position,
            evicted: want.evicted?.id,
          });
      } else if (r < 0.5 && known.length > 0) {
        const id = pick(known);
        const entry = reference.get(id);
        const lane: QueueLane = entry?.lane ?? 'batch';
        const group = entry?.item.group ?? 'm1';
        if (entry === undefined) {
          reference.requeueFront(id, lane, { group });
          expect(await queue.requeueFront({ id, lane, group, payload: id }), where).toBe(true);
        } else expect(await queue.requeueFront({ id, lane, group, payload: id }), where).toBe(false);
      } else if (r < 0.75) {
        const groups = GROUPS.filter(() => random() < 0.6);
        const want = reference.find((e) => groups.includes(e.item.group));
        if (want !== undefined) reference.remove(want.id);
        expect((await queue.claim(groups))?.id, where).toBe(want?.id);
      } else if (r < 0.85 && known.length > 0) {
        const id = pick(known);
        expect((await queue.remove(id))?.id, where).toBe(reference.remove(id)?.id);
      } else if (r < 0.95 && known.length > 0) {
        const id = pick(known);
        expect(await queue.position(id), where).toBe(reference.positionOf(id));
      } else {
        const group = pick(GROUPS);
        const lane: QueueLane = random() < 0.5 ? 'interactive' : 'batch';
        expect(await queue.countAhead(group, lane), where).toBe(reference.countAhead(group, lane));
        expect(await queue.sizes(), where).toEqual({ interactive: reference.sizeOf('interactive'), batch: reference.sizeOf('batch') });
      }
    }
    const rest: string[] = [];
    for (let e = await queue.claim(); e !== undefined; e = await queue.claim()) rest.push(e.id);
    expect(rest).toEqual(reference.drain().map((e) => e.id));
  });
});
