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
    expect(await s1!.leases.held('n1/p')).toBe(2);
    a.release(first!);
    await sleep(20); // the release is not awaited by its caller
    expect(await s1!.leases.held('n1/p')).toBe(1);
    expect(await a.acquire('n1/p', 2, 't3')).toBeDefined();
    // b stops renewing (as a dead replica would): its lease lapses and frees the slot
    await b.close();
    await sleep(600);
    expect(await s1!.leases.held('n1/p')).toBe(1);
    expect(a.size).toBe(1);
    await a.close();
  });
});
