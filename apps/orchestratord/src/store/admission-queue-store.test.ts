import { describe, expect, it } from 'vitest';
import type { QueueEntryInput, QueueLane } from './admission-queue-store.js';
import { STORE_KINDS, sleep, storeHarness } from '../testing/store-harness.js';

const entry = (id: string, lane: QueueLane, group = 'm', deadlineMs?: number): QueueEntryInput => ({ id, lane, group, payload: JSON.stringify({ id }), deadlineMs });

describe.each(STORE_KINDS)('admission queue (%s store)', (kind) => {
  const h = storeHarness(kind);

  it('interactive before batch and FIFO within a lane, across replicas; positions are cluster-wide', async () => {
    const [a, b, c] = await h.open(3);
    expect(await a!.queue.add(entry('b1', 'batch'))).toEqual({ kind: 'queued', position: 0 });
    expect(await b!.queue.add(entry('i1', 'interactive'))).toEqual({ kind: 'queued', position: 0 });
    expect(await c!.queue.add(entry('b2', 'batch'))).toEqual({ kind: 'queued', position: 2 });
    expect(await a!.queue.add(entry('i2', 'interactive'))).toEqual({ kind: 'queued', position: 1 });
    expect(await b!.queue.add(entry('i1', 'interactive'))).toEqual({ kind: 'duplicate' });
    expect(await c!.queue.position('i1')).toBe(0);
    expect(await a!.queue.position('b1')).toBe(2);
    expect(await b!.queue.position('b2')).toBe(3);
    expect(await b!.queue.position('nope')).toBeUndefined();
    expect(await c!.queue.sizes()).toEqual({ interactive: 2, batch: 2 });
    expect(await a!.queue.countAhead('m', 'interactive')).toBe(2);
    expect(await a!.queue.countAhead('m', 'batch')).toBe(4);
    expect(await a!.queue.countAhead('other', 'batch')).toBe(0);
    const order: string[] = [];
    for (const s of [c, b, a, c]) order.push((await s!.queue.claim())!.id);
    expect(order).toEqual(['i1', 'i2', 'b1', 'b2']);
    expect(await a!.queue.claim()).toBeUndefined();
  });

  it('one admission order for concurrent adds from 3 replicas: claims follow it, each entry once', async () => {
    const clients = await h.open(3);
    const adds = await Promise.all(Array.from({ length: 150 }, (_, i) => clients[i % 3]!.queue.add(entry(`t${i}`, 'batch'))));
    const positions = adds.map((r) => (r.kind === 'queued' ? r.position : -1));
    expect([...positions].sort((x, y) => x - y)).toEqual(Array.from({ length: 150 }, (_, i) => i));
    const byPosition = positions.map((p, i) => ({ p, id: `t${i}` })).sort((x, y) => x.p - y.p);
    // concurrent claims from all three: every entry exactly once, and in admission order per claimer
    const claimed: string[][] = [[], [], []];
    await Promise.all(
      clients.map(async (s, k) => {
        for (let e = await s.queue.claim(); e !== undefined; e = await s.queue.claim()) claimed[k]!.push(e.id);
      }),
    );
    const all = claimed.flat();
    expect(new Set(all).size).toBe(150);
    const rank = new Map(byPosition.map((x) => [x.id, x.p] as const));
    for (const mine of claimed) for (let i = 1; i < mine.length; i += 1) expect(rank.get(mine[i]!)!).toBeGreaterThan(rank.get(mine[i - 1]!)!);
  });

  it('no batch task starts while an interactive one for the same model waits on another replica', async () => {
    const [a, b, c] = await h.open(3);
    await Promise.all([
      ...Array.from({ length: 20 }, (_, i) => b!.queue.add(entry(`batch-${i}`, 'batch', 'm'))),
      ...Array.from({ length: 20 }, (_, i) => a!.queue.add(entry(`inter-${i}`, 'interactive', 'm'))),
      c!.queue.add(entry('x-inter', 'interactive', 'x')),
    ]);
    // 20 concurrent claims from three replicas: all interactive, every batch task still waits
    const claims = await Promise.all(Array.from({ length: 20 }, (_, i) => [a, b, c][i % 3]!.queue.claim(['m'])));
    expect(claims.map((e) => e!.lane)).toEqual(Array.from({ length: 20 }, () => 'interactive'));
    expect(new Set(claims.map((e) => e!.id)).size).toBe(20);
    expect(await c!.queue.sizes()).toEqual({ interactive: 1, batch: 20 });
    for (let i = 0; i < 20; i += 1) expect((await [a, b, c][i % 3]!.queue.claim(['m']))!.id).toBe(`batch-${i}`);
    // a model no free pool serves does not block: 'x' is still queued, and only 'x' is left
    expect(await a!.queue.claim(['m'])).toBeUndefined();
    expect(await b!.queue.claim(['m', 'x'])).toMatchObject({ id: 'x-inter', group: 'x' });
  });

  it('take: a replica takes its own task only when it is first of its model in the cluster order', async () => {
    const [a, b] = await h.open(2);
    await b!.queue.add(entry('b-batch', 'batch', 'm'));
    await a!.queue.add(entry('a-inter', 'interactive', 'm'));
    await b!.queue.add(entry('b-inter', 'interactive', 'm'));
    await a!.queue.add(entry('a-other', 'batch', 'x'));
    // b's batch task waits for both interactive ones; b's interactive one for a's, admitted first
    expect(await b!.queue.take('b-batch')).toEqual({ kind: 'behind', first: 'a-inter' });
    expect(await b!.queue.take('b-inter')).toEqual({ kind: 'behind', first: 'a-inter' });
    // another model is not in the way
    expect(await a!.queue.take('a-other')).toMatchObject({ kind: 'taken', entry: { id: 'a-other', group: 'x', lane: 'batch' } });
    expect(await a!.queue.take('a-inter')).toMatchObject({ kind: 'taken', entry: { id: 'a-inter', lane: 'interactive' } });
    expect(await a!.queue.take('a-inter')).toEqual({ kind: 'absent' });
    expect(await b!.queue.take('b-batch')).toEqual({ kind: 'behind', first: 'b-inter' });
    expect(await b!.queue.take('b-inter')).toMatchObject({ kind: 'taken' });
    // concurrent takes of one entry: exactly one wins
    const r = await Promise.all([a!.queue.take('b-batch'), b!.queue.take('b-batch'), a!.queue.take('b-batch')]);
    expect(r.filter((x) => x.kind === 'taken')).toHaveLength(1);
    expect(await a!.queue.sizes()).toEqual({ interactive: 0, batch: 0 });
  });

  it('gone: the owner learns which of its entries left without it, and which were evicted', async () => {
    const [a, b] = await h.open(2, { admission_capacity: 2, admission_policy: 'drop-lru' });
    await a!.queue.add(entry('a1', 'batch'));
    await a!.queue.add(entry('a2', 'interactive'));
    expect(await a!.queue.gone(['a1', 'a2'])).toEqual([]);
    await b!.queue.add(entry('b1', 'interactive')); // evicts a1
    await b!.queue.remove('a2'); // not an eviction
    expect(await a!.queue.gone(['a1', 'a2', 'b1'])).toEqual([
      { id: 'a1', evicted: true },
      { id: 'a2', evicted: false },
    ]);
    expect(await a!.queue.gone([])).toEqual([]);
  });

  it('heads: the first entries of each lane in dispatch order, left queued', async () => {
    const [a, b] = await h.open(2);
    for (let i = 0; i < 3; i += 1) {
      await a!.queue.add(entry(`b${i}`, 'batch'));
      await b!.queue.add(entry(`i${i}`, 'interactive'));
    }
    expect((await a!.queue.heads(2)).map((e) => e.id)).toEqual(['i0', 'i1', 'b0', 'b1']);
    expect((await b!.queue.heads(10)).map((e) => `${e.id}:${e.lane}`)).toEqual(['i0:interactive', 'i1:interactive', 'i2:interactive', 'b0:batch', 'b1:batch', 'b2:batch']);
    expect(await a!.queue.sizes()).toEqual({ interactive: 3, batch: 3 });
  });

  it('claims in dispatch order: sequential claims from alternating replicas take every interactive entry first', async () => {
    const [a, b] = await h.open(2);
    for (let i = 0; i < 5; i += 1) {
      await a!.queue.add(entry(`b${i}`, 'batch', i % 2 === 0 ? 'm' : 'n'));
      await b!.queue.add(entry(`i${i}`, 'interactive', i % 2 === 0 ? 'n' : 'm'));
    }
    const ids: string[] = [];
    for (let i = 0; i < 10; i += 1) ids.push((await [a, b][i % 2]!.queue.claim(['m', 'n']))!.id);
    expect(ids).toEqual(['i0', 'i1', 'i2', 'i3', 'i4', 'b0', 'b1', 'b2', 'b3', 'b4']);
  });

  it('reject: one capacity for the cluster', async () => {
    const clients = await h.open(3, { admission_capacity: 3, admission_policy: 'reject' });
    const r = await Promise.all(Array.from({ length: 10 }, (_, i) => clients[i % 3]!.queue.add(entry(`t${i}`, i % 2 === 0 ? 'batch' : 'interactive'))));
    expect(r.filter((x) => x.kind === 'queued')).toHaveLength(3);
    expect(r.filter((x) => x.kind === 'full')).toEqual(Array.from({ length: 7 }, () => ({ kind: 'full', policy: 'reject' })));
  });

  it('drop-lru evicts the oldest batch entry of the cluster and returns it; full when no batch entry is left', async () => {
    const [a, b] = await h.open(2, { admission_capacity: 2, admission_policy: 'drop-lru' });
    await a!.queue.add(entry('b1', 'batch', 'm', 60_000));
    await b!.queue.add(entry('b2', 'batch'));
    const r1 = await b!.queue.add(entry('i1', 'interactive'));
    expect(r1).toMatchObject({ kind: 'queued', position: 0, evicted: { id: 'b1', lane: 'batch', group: 'm', payload: '{"id":"b1"}' } });
    expect(r1.kind === 'queued' && Number.isFinite(r1.evicted?.deadlineAt)).toBe(true);
    expect(await a!.queue.add(entry('b3', 'batch'))).toMatchObject({ kind: 'queued', position: 1, evicted: { id: 'b2', deadlineAt: Number.POSITIVE_INFINITY } });
    expect(await a!.queue.add(entry('i2', 'interactive'))).toMatchObject({ kind: 'queued', position: 1, evicted: { id: 'b3' } });
    expect(await b!.queue.add(entry('i3', 'interactive'))).toEqual({ kind: 'full', policy: 'drop-lru' });
    expect(await a!.queue.position('b1')).toBeUndefined();
  });

  it('requeueFront leads its lane past the capacity; remove takes an entry out by id', async () => {
    const [a, b] = await h.open(2, { admission_capacity: 2 });
    await a!.queue.add(entry('i1', 'interactive'));
    await a!.queue.add(entry('b1', 'batch'));
    expect(await b!.queue.requeueFront(entry('b0', 'batch'))).toBe(true);
    expect(await b!.queue.requeueFront(entry('b0', 'batch'))).toBe(false);
    expect(await b!.queue.requeueFront(entry('i0', 'interactive'))).toBe(true);
    expect(await a!.queue.sizes()).toEqual({ interactive: 2, batch: 2 });
    expect(await b!.queue.position('b0')).toBe(2);
    expect(await a!.queue.remove('i1')).toMatchObject({ id: 'i1', lane: 'interactive' });
    expect(await a!.queue.remove('i1')).toBeUndefined();
    const ids: string[] = [];
    for (let e = await a!.queue.claim(); e !== undefined; e = await b!.queue.claim()) ids.push(e.id);
    expect(ids).toEqual(['i0', 'b0', 'b1']);
  });

  it('expired entries are taken once, by one replica, in dispatch order', async () => {
    const [a, b, c] = await h.open(3);
    await a!.queue.add(entry('b-late', 'batch', 'm', 300));
    await b!.queue.add(entry('i-late', 'interactive', 'm', 300));
    await c!.queue.add(entry('keeps', 'batch', 'm'));
    await c!.queue.add(entry('later', 'batch', 'm', 60_000));
    expect(await a!.queue.takeExpired()).toEqual([]);
    await sleep(400);
    const taken = await Promise.all([a!.queue.takeExpired(), b!.queue.takeExpired(), c!.queue.takeExpired()]);
    const all = taken.flat();
    expect(all.map((e) => e.id).sort()).toEqual(['b-late', 'i-late']);
    expect(taken.find((t) => t.length > 0)!.map((e) => e.id)).toEqual(['i-late', 'b-late']);
    expect(await a!.queue.sizes()).toEqual({ interactive: 0, batch: 2 });
  });
});
