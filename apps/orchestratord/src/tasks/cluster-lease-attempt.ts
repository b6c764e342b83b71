import type { ClusterSlotLeases } from '../registry/cluster-slot-leases.js';
import { candidateKey, type PoolView } from '../registry/pool-view.js';
import type { AttemptOutcome } from '../upstream/dispatch-attempt.js';

/**
 * Runs an attempt under a cluster slot lease (Redis store): the lease is taken before the dispatch
 * leaves and given back when the attempt ends. A pool whose slots are all leased across the
 * cluster answers as a node that is saturated would (re-placed, no retry spent, the pool skipped
 * here until its next heartbeat or the saturation time); a store that cannot be reached fails the
 * task as retriable STORE_UNAVAILABLE.
 */
export function withClusterLease(leases: ClusterSlotLeases, view: PoolView, taskId: string, run: () => Promise<AttemptOutcome>): Promise<AttemptOutcome> {
  return leases.acquire(candidateKey(view), view.slots_total, taskId).then(
    (leaseId): Promise<AttemptOutcome> | AttemptOutcome => {
      if (leaseId === undefined) {
        return { kind: 'retry', code: 'POOL_UNREADY', message: `every slot of pool ${view.pool_id} is leased across the cluster`, penalty: 'saturated' };
      }
      return run().finally(() => leases.release(leaseId));
    },
    (err: unknown): AttemptOutcome => ({
      kind: 'fail',
      code: 'STORE_UNAVAILABLE',
      message: `cluster store unreachable: ${err instanceof Error ? err.message : String(err)}`,
      retriable: true,
    }),
  );
}
