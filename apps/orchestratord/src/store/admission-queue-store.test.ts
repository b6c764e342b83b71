import { describe, expect, it } from 'vitest';
import { STORE_KINDS, sleep, storeHarness } from '../testing/store-harness.js';
import { admission, admissionView } from '../testing/store-steps.js';
import type { QueueLane } from './admission-queue-store.js';

/** Task `id` of replica `owner` for model `group` (the entry's payload names the owner). */
const task = (id: string, lane: QueueLane, owner = 'A', group = 'm', deadlineMs?: number) => ({
  ...admission(id, owner, { lane, group }),
  entry: { lane, group, payload: owner, deadlineMs },
});

// The queue's order, capacity and policy, as the task lifecycle steps reach them (admit, dispatch,
// finish) and the queue's own calls (requeue at the front, gone, remove, sizes).
describe.each(STORE_KINDS)('admission queue (%s store)', (kind) => {
  const h = storeHarness(kind);

  it('interactive before batch and FIFO within a lane, across replicas; positions and counts are cluster-wide', async () => {
    const [a, b, c] = await h.open(3);
    expect(await a!.lifecycle.admit(task('b1', 'batch'))).toMatchObject({ kind: 'queued', position: 0 });
    expect(await b!.lifecycle.admit(task('i1', 'interactive'))).toMatchObject({ kind: 'queued', position: 0 });
    expect(await c!.lifecycle.admit(task('b2', 'batch'))).toMatchObject({
      kind: 'queued',
      position: 2,
      view: { ahead: 2 },
    });
    expect(await a!.lifecycle.admit(task('i2', 'interactive'))).toMatchObject({
      kind: 'queued',
      position: 1,
      view: { ahead: 1 },
    });
    expect(await b!.lifecycle.admit(task('i1', 'interactive'))).toEqual({ kind: 'exists' });
    expect(await h.queued(c!)).toEqual(['i1', 'i2', 'b1', 'b2']);
    expect(await c!.queue.sizes()).toEqual({ interactive: 2, batch: 2 });
    expect((await admissionView(a!, 's', 'm', 'interactive')).ahead).toBe(2);
    expect((await admissionView(a!, 's', 'm', 'batch')).ahead).toBe(4);
    expect((await admissionView(a!, 's', 'other', 'batch')).ahead).toBe(0);
    // each goes only as the first of its model: the batch ones wait for every interactive one
    expect(await a!.lifecycle.dispatch('b1', 1, 'p')).toEqual({ kind: 'behind', first: 'i1' });
    expect(await a!.lifecycle.dispatch('i2', 1, 'p')).toEqual({ kind: 'behind', first: 'i1' });
    for (const [s, id] of [
      [b, 'i1'],
      [a, 'i2'],
      [a, 'b1'],
      [c, 'b2'],
    ] as const)
      expect(await s!.lifecycle.dispatch(id, 1, 'p')).toMatchObject({ kind: 'taken', entry: { id } });
    expect(await h.queued(a!)).toEqual([]);
  });

  it('one admission order for concurrent admissions from 3 replicas: each task is taken once, and only ever waits behind one admitted before it', async () => {
    const clients = await h.open(3);
    const n = 60;
    const admitted = await Promise.all(
      Array.from({ length: n }, (_, i) => clients[i % 3]!.lifecycle.admit(task(`t${i}`, 'batch', `R${i % 3}`))),
    );
    const positions = admitted.map((r) => (r.kind === 'queued' ? r.position : -1));
    expect([...positions].sort((x, y) => x - y)).toEqual(Array.from({ length: n }, (_, i) => i));
    const rank = new Map<string, number>(positions.map((p, i) => [`t${i}`, p]));
    expect(await h.queued(clients[0]!)).toEqual([...rank.keys()].sort((x, y) => rank.get(x)! - rank.get(y)!));
    // each replica dispatches its own tasks in its order, all at once, as replicas do
    const taken: string[] = [];
    await Promise.all(
      clients.map(async (s, k) => {
        const mine = [...rank.keys()]
          .filter((id) => Number(id.slice(1)) % 3 === k)
          .sort((x, y) => rank.get(x)! - rank.get(y)!);
        for (const id of mine) {
          for (;;) {
            const r = await s.lifecycle.dispatch(id, 1, 'p');
            if (r.kind === 'taken') break;
            expect(r.kind).toBe('behind');
            if (r.kind === 'behind') expect(rank.get(r.first)!).toBeLessThan(rank.get(id)!);
            await sleep(1);
          }
          taken.push(id);
        }
      }),
    );
    expect(new Set(taken).size).toBe(n);
    expect(await clients[1]!.queue.sizes()).toEqual({ interactive: 0, batch: 0 });
  });

  it('no batch task starts while an interactive one for the same model waits on another replica; another model is not in the way', async () => {
    const [a, b, c] = await h.open(3);
    await Promise.all([
      ...Array.from({ length: 10 }, (_, i) => b!.lifecycle.admit(task(`batch-${i}`, 'batch', 'B'))),
      ...Array.from({ length: 10 }, (_, i) => a!.lifecycle.admit(task(`inter-${i}`, 'interactive', 'A'))),
    ]);
    const first = (await h.queued(a!))[0]!;
    expect(first).toMatch(/^inter-/);
    await c!.lifecycle.admit(task('x-batch', 'batch', 'C', 'x'));
    // every batch task asks at once: all behind the model's first interactive one
    const asked = await Promise.all(Array.from({ length: 10 }, (_, i) => b!.lifecycle.dispatch(`batch-${i}`, 1, 'p')));
    expect(asked).toEqual(Array.from({ length: 10 }, () => ({ kind: 'behind', first })));
    // a model no free pool serves does not block: 'x' goes past them all
    expect(await c!.lifecycle.dispatch('x-batch', 1, 'p')).toMatchObject({ kind: 'taken' });
    for (const id of (await h.queued(a!)).filter((i) => i.startsWith('inter-')))
      expect(await a!.lifecycle.dispatch(id, 1, 'p')).toMatchObject({ kind: 'taken' });
    expect(await b!.lifecycle.dispatch('batch-0', 1, 'p')).toMatchObject({ kind: 'taken' });
    expect(await c!.queue.sizes()).toEqual({ interactive: 0, batch: 9 });
  });

  it('a replica takes its own task only when it is first of its model in the cluster order; one of concurrent takes wins', async () => {
    const [a, b] = await h.open(2);
    await b!.lifecycle.admit(task('b-batch', 'batch', 'B'));
    await a!.lifecycle.admit(task('a-inter', 'interactive', 'A'));
    await b!.lifecycle.admit(task('b-inter', 'interactive', 'B'));
    await a!.lifecycle.admit(task('a-other', 'batch', 'A', 'x'));
    // b's batch task waits for both interactive ones; b's interactive one for a's, admitted first
    expect(await b!.lifecycle.dispatch('b-batch', 1, 'p')).toEqual({ kind: 'behind', first: 'a-inter' });
    expect(await b!.lifecycle.dispatch('b-inter', 1, 'p')).toEqual({ kind: 'behind', first: 'a-inter' });
    // another model is not in the way
    expect(await a!.lifecycle.dispatch('a-other', 1, 'p')).toMatchObject({
      kind: 'taken',
      entry: { id: 'a-other', group: 'x', lane: 'batch' },
    });
    expect(await a!.lifecycle.dispatch('a-inter', 1, 'p')).toMatchObject({
      kind: 'taken',
      entry: { id: 'a-inter', lane: 'interactive' },
    });
    expect(await a!.lifecycle.dispatch('a-inter', 1, 'p')).toEqual({ kind: 'absent' });
    expect(await b!.lifecycle.dispatch('b-batch', 1, 'p')).toEqual({ kind: 'behind', first: 'b-inter' });
    expect(await b!.lifecycle.dispatch('b-inter', 1, 'p')).toMatchObject({ kind: 'taken' });
    const r = await Promise.all([
      a!.lifecycle.dispatch('b-batch', 1, 'p'),
      b!.lifecycle.dispatch('b-batch', 1, 'p'),
      a!.lifecycle.dispatch('b-batch', 1, 'p'),
    ]);
    expect(r.filter((x) => x.kind === 'taken')).toHaveLength(1);
    expect(r.filter((x) => x.kind === 'absent')).toHaveLength(2);
    expect(await a!.queue.sizes()).toEqual({ interactive: 0, batch: 0 });
  });

  it('gone: the owner learns which of its entries left without it, and which were evicted', async () => {
    const [a, b] = await h.open(2, { admission_capacity: 2, admission_policy: 'drop-lru' });
    await a!.lifecycle.admit(task('a1', 'batch'));
    await a!.lifecycle.admit(task('a2', 'interactive'));
    expect(await a!.queue.gone(['a1', 'a2'])).toEqual([]);
    await b!.lifecycle.admit(task('b1', 'interactive', 'B')); // evicts a1
    await b!.queue.remove('a2'); // not an eviction
    expect(await a!.queue.gone(['a1', 'a2', 'b1'])).toEqual([
      { id: 'a1', evicted: true },
      { id: 'a2', evicted: false },
    ]);
    expect(await a!.queue.gone([])).toEqual([]);
  });

  it('reject: one capacity for the cluster', async () => {
    const clients = await h.open(3, { admission_capacity: 3, admission_policy: 'reject' });
    const r = await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        clients[i % 3]!.lifecycle.admit(task(`t${i}`, i % 2 === 0 ? 'batch' : 'interactive')),
      ),
    );
    expect(r.filter((x) => x.kind === 'queued')).toHaveLength(3);
    expect(r.filter((x) => x.kind === 'full').map((x) => x.kind === 'full' && x.policy)).toEqual(
      Array.from({ length: 7 }, () => 'reject'),
    );
  });

  it('drop-lru evicts the oldest batch entry of the cluster and returns it; full when no batch entry is left', async () => {
    const [a, b] = await h.open(2, { admission_capacity: 2, admission_policy: 'drop-lru' });
    await a!.lifecycle.admit(task('b1', 'batch', 'A', 'm', 60_000));
    await b!.lifecycle.admit(task('b2', 'batch', 'B'));
    const r1 = await b!.lifecycle.admit(task('i1', 'interactive', 'B'));
    expect(r1).toMatchObject({
      kind: 'queued',
      position: 0,
      evicted: { id: 'b1', lane: 'batch', group: 'm', payload: 'A' },
    });
    expect(r1.kind === 'queued' && Number.isFinite(r1.evicted?.deadlineAt)).toBe(true);
    expect(await a!.lifecycle.admit(task('b3', 'batch'))).toMatchObject({
      kind: 'queued',
      position: 1,
      evicted: { id: 'b2', deadlineAt: Number.POSITIVE_INFINITY },
    });
    expect(await a!.lifecycle.admit(task('i2', 'interactive'))).toMatchObject({
      kind: 'queued',
      position: 1,
      evicted: { id: 'b3' },
    });
    expect(await b!.lifecycle.admit(task('i3', 'interactive', 'B'))).toMatchObject({
      kind: 'full',
      policy: 'drop-lru',
    });
    expect(await h.queued(a!)).toEqual(['i1', 'i2']);
  });

  it('a requeued task leads its lane, past the capacity; remove takes an entry out by id', async () => {
    const [a, b] = await h.open(2, { admission_capacity: 2 });
    for (const [id, lane] of [
      ['b0', 'batch'],
      ['i0', 'interactive'],
    ] as const) {
      await b!.lifecycle.admit(task(id, lane, 'B', id));
      expect(await b!.lifecycle.dispatch(id, 1, 'p')).toMatchObject({ kind: 'taken' });
    }
    await a!.lifecycle.admit(task('i1', 'interactive'));
    await a!.lifecycle.admit(task('b1', 'batch'));
    expect(
      await b!.lifecycle.requeue({ id: 'b0', fence: 1, entry: { lane: 'batch', group: 'b0', payload: 'B' } }),
    ).toMatchObject({ ok: true });
    expect(
      await b!.lifecycle.requeue({ id: 'i0', fence: 1, entry: { lane: 'interactive', group: 'i0', payload: 'B' } }),
    ).toMatchObject({ ok: true });
    expect(await a!.queue.sizes()).toEqual({ interactive: 2, batch: 2 });
    expect(await h.queued(a!)).toEqual(['i0', 'i1', 'b0', 'b1']);
    expect(await a!.queue.remove('i1')).toMatchObject({ id: 'i1', lane: 'interactive' });
    expect(await a!.queue.remove('i1')).toBeUndefined();
    expect(await h.queued(b!)).toEqual(['i0', 'b0', 'b1']);
  });
});
