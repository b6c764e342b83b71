import { describe, expect, it } from 'vitest';
import { sleep, STORE_KINDS, storeHarness } from '../testing/store-harness.js';
import { captureLogger } from '../testing/test-helpers.js';
import { ClusterSlotLeases } from './cluster-slot-leases.js';

describe.each(STORE_KINDS)('cluster slot leases (%s store)', (kind) => {
  const stores = storeHarness(kind);

  it('limits a pool to its slots across replicas, renews while held, and a closed replica’s leases lapse', async () => {
    const [s1, s2] = await stores.open(2);
    const logger = captureLogger().logger;
    const a = new ClusterSlotLeases({ store: s1!.leases, logger, ttlMs: 300 });
    const b = new ClusterSlotLeases({ store: s2!.leases, logger, ttlMs: 300 });
    const first = await a.acquire('n1/p', 2, 't1');
    const second = await b.acquire('n1/p', 2, 't2');
    expect(first).toBeDefined();
    expect(second).toBeDefined();
    expect(await b.acquire('n1/p', 2, 't3')).toBeUndefined();
    // renewed every 100 ms: alive well past the 300 ms TTL
    await sleep(800);
    expect(await s1!.leases.list('n1/p')).toHaveLength(2);
    a.release(first!);
    await sleep(20); // the release is not awaited by its caller
    expect(await s1!.leases.list('n1/p')).toHaveLength(1);
    expect(await a.acquire('n1/p', 2, 't3')).toBeDefined();
    // b stops renewing (as a dead replica would): its lease lapses and frees the slot
    await b.close();
    await sleep(600);
    expect(await s1!.leases.list('n1/p')).toHaveLength(1);
    expect(a.size).toBe(1);
    await a.close();
  });
  it("names a pool's holders, and gives back another replica's leases of a task, never its own (withClusterLease: a re-attached dispatch keeps one lease)", async () => {
    const [s1, s2] = await stores.open(2);
    const logger = captureLogger().logger;
    const dead = new ClusterSlotLeases({ store: s1!.leases, logger, ttlMs: 60_000 });
    const adopter = new ClusterSlotLeases({ store: s2!.leases, logger, ttlMs: 60_000 });
    const former = await dead.acquire('n1/p', 1, 'task#1');
    expect(former).toBeDefined();
    expect(await dead.acquire('n1/p', 2, 'other')).toBeDefined();
    expect((await adopter.holders('n1/p')).sort()).toEqual(['other', 'task#1']);
    // the adopter re-attaches under its own lease (whatever the count), then the former goes
    const own = await adopter.acquire('n1/p', Number.MAX_SAFE_INTEGER, 'task#1');
    expect(await s1!.leases.list('n1/p')).toHaveLength(3);
    await adopter.releaseTask('n1/p', 'task#1');
    expect((await s1!.leases.list('n1/p')).filter((l) => l.startsWith('task#1#'))).toEqual([own]);
    expect(await s1!.leases.list('n1/p')).toHaveLength(2);
    // idempotent, and a task without leases there is nothing to do
    await adopter.releaseTask('n1/p', 'task#1');
    await adopter.releaseTask('n1/other', 'task#1');
    expect(await s1!.leases.list('n1/p')).toHaveLength(2);
    await dead.close();
    await adopter.close();
  });
});
