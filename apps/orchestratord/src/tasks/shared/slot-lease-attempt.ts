import type { ClusterSlotLeases } from '../../registry/cluster-slot-leases.js';
import { candidateKey, type PoolView } from '../../registry/pool-view.js';
import type { AttemptOutcome } from '../../upstream/dispatch-attempt.js';

/**
 * Runs an attempt under a cluster slot lease (Redis store): the lease is taken before the dispatch
 * leaves and given back when the attempt ends. A pool whose slots are all leased across the
 * cluster sends the task back to the head of the queue (no retry spent); the pool is not marked
 * saturated — the grant's answer and the lease signals already give this replica's view of it the
 * slots the others hold, and a mark would keep it from a slot freed a moment later. A store that
 * cannot be reached fails the task as retriable STORE_UNAVAILABLE. A `resumed` attempt (a task taken
 * over from a dead replica, re-attaching to its generation) takes its lease whatever the count: its
 * generation holds the slot already, and the dead replica's lease for it may not have lapsed yet;
 * once it has its own, it gives that one back (one lease per running generation: two would keep a
 * queued task from a free slot until the old one lapsed).
 * `held`: a lease the task took already (the cluster gate takes it before the task leaves the
 * cluster's queue); it is given back the same way.
 */
export function withClusterLease(
  leases: ClusterSlotLeases,
  view: PoolView,
  taskId: string,
  run: () => Promise<AttemptOutcome>,
  resumed = false,
  held?: string,
): Promise<AttemptOutcome> {
  if (held !== undefined) return run().finally(() => leases.release(held));
  const poolKey = candidateKey(view);
  return leases.acquire(poolKey, resumed ? Number.MAX_SAFE_INTEGER : view.slots_total, taskId).then(
    (leaseId): Promise<AttemptOutcome> | AttemptOutcome => {
      if (leaseId === undefined) {
        return {
          kind: 'retry',
          code: 'POOL_UNREADY',
          message: `every slot of pool ${view.pool_id} is leased across the cluster`,
          penalty: 'leased',
        };
      }
      if (resumed) void leases.releaseTask(poolKey, taskId);
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
