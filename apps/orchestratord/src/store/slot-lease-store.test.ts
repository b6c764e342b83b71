import { describe, expect, it } from 'vitest';
import { STORE_KINDS, sleep, storeHarness } from '../testing/store-harness.js';

describe.each(STORE_KINDS)('slot leases (%s store)', (kind) => {
  const h = storeHarness(kind);

  it('grants up to the slots, refuses past them, frees on release; acquire is idempotent per lease id', async () => {
    const [a, b] = await h.open(2);
    const req = { poolKey: 'n1/p1', slots: 2, ttlMs: 10_000 };
    expect(await a!.leases.acquire({ ...req, leaseId: 't1' })).toMatchObject({ kind: 'granted', held: 1 });
    expect(await b!.leases.acquire({ ...req, leaseId: 't1' })).toMatchObject({ kind: 'granted', held: 1 });
    expect(await b!.leases.acquire({ ...req, leaseId: 't2' })).toMatchObject({ kind: 'granted', held: 2 });
    expect(await a!.leases.acquire({ ...req, leaseId: 't3' })).toEqual({ kind: 'full', held: 2 });
    expect(await a!.leases.list('n1/p1')).toHaveLength(2);
    expect((await b!.leases.list('n1/p1')).sort()).toEqual(['t1', 't2']);
    expect(await b!.leases.list('n1/other')).toEqual([]);
    expect(await b!.leases.release('n1/p1', 't1')).toBe(true);
    expect(await b!.leases.release('n1/p1', 't1')).toBe(false);
    expect(await a!.leases.renew('n1/p1', 't1', 10_000)).toBe(false);
    expect(await a!.leases.acquire({ ...req, leaseId: 't3' })).toMatchObject({ kind: 'granted', held: 2 });
    // a smaller limit (the pool's capacity shrank) refuses without touching held leases
    expect(await a!.leases.acquire({ ...req, slots: 1, leaseId: 't4' })).toEqual({ kind: 'full', held: 2 });
  });

  it("a dead holder's leases lapse after their ttl; a renewed lease does not", async () => {
    const [a, b] = await h.open(2);
    const req = { poolKey: 'n1/p1', slots: 2, ttlMs: 400 };
    await a!.leases.acquire({ ...req, leaseId: 'dies' });
    const kept = await a!.leases.acquire({ ...req, leaseId: 'kept' });
    expect(kept.kind).toBe('granted');
    expect((await b!.leases.acquire({ ...req, leaseId: 'new' })).kind).toBe('full');
    await sleep(150);
    expect(await a!.leases.renew('n1/p1', 'kept', 800)).toBe(true);
    await sleep(350);
    // 'dies' lapsed (500 ms > 400 ms); 'kept' was renewed
    expect(await b!.leases.list('n1/p1')).toEqual(['kept']);
    expect(await b!.leases.acquire({ ...req, leaseId: 'new' })).toMatchObject({ kind: 'granted', held: 2 });
    expect(await a!.leases.renew('n1/p1', 'dies', 400)).toBe(false);
  });

  it('3 replicas racing 200 tasks on a 2-slot pool never hold more than 2 leases at once', async () => {
    const clients = await h.open(3);
    let inUse = 0;
    let most = 0;
    let granted = 0;
    const run = async (i: number): Promise<void> => {
      const store = clients[i % 3]!;
      for (;;) {
        const r = await store.leases.acquire({ poolKey: 'n1/hot', slots: 2, leaseId: `task-${i}`, ttlMs: 10_000 });
        if (r.kind === 'granted') break;
        expect(r.held).toBeLessThanOrEqual(2);
        await sleep(1 + (i % 3));
      }
      granted += 1;
      inUse += 1;
      most = Math.max(most, inUse);
      expect(inUse).toBeLessThanOrEqual(2);
      await sleep(i % 2);
      inUse -= 1;
      expect(await store.leases.release('n1/hot', `task-${i}`)).toBe(true);
    };
    await Promise.all(Array.from({ length: 200 }, (_, i) => run(i)));
    expect(granted).toBe(200);
    expect(most).toBe(2);
    expect(await clients[0]!.leases.list('n1/hot')).toEqual([]);
  });
});
