import { describe, expect, it } from 'vitest';
import { ClusterSlotLeases } from '../../registry/cluster-slot-leases.js';
import type { PoolView } from '../../registry/pool-view.js';
import { storeHarness } from '../../testing/store-harness.js';
import { captureLogger } from '../../testing/test-helpers.js';
import { withClusterLease } from './slot-lease-attempt.js';

describe('withClusterLease', () => {
  const stores = storeHarness('redis');
  const view = { node_id: 'n1', pool_id: 'p', slots_total: 1 } as PoolView;

  it("a resumed attempt leases the slot whatever the count, then gives back the dead replica's lease of the task: one lease for the one generation", async () => {
    const [s1, s2] = await stores.open(2);
    const logger = captureLogger().logger;
    const dead = new ClusterSlotLeases({ store: s1!.leases, logger, ttlMs: 60_000 });
    const adopter = new ClusterSlotLeases({ store: s2!.leases, logger, ttlMs: 60_000 });
    expect(await dead.acquire('n1/p', 1, 't1')).toBeDefined();
    let during: string[] = [];
    const outcome = await withClusterLease(
      adopter,
      view,
      't1',
      async () => {
        await new Promise((ok) => setTimeout(ok, 50));
        during = await s1!.leases.list('n1/p');
        return { kind: 'aborted' };
      },
      true,
    );
    expect(outcome).toEqual({ kind: 'aborted' });
    expect(during).toHaveLength(1);
    expect(adopter.size).toBe(0);
    await new Promise((ok) => setTimeout(ok, 20)); // the release at the attempt's end is not awaited
    expect(await s1!.leases.list('n1/p')).toHaveLength(0);
    await dead.close();
    await adopter.close();
  });
});
