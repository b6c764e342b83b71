/**
 * Slot leases per pool, shared by every replica: across the cluster a pool never has more leases
 * than the slot limit the caller passes (its effective free capacity, from `pool-accounting.ts`).
 *
 * A lease has an expiry (store clock): its holder renews it while the dispatch lasts; a holder
 * that dies stops renewing and its leases lapse, so a dead replica cannot pin a pool's slots.
 * Acquire is idempotent per lease id (use the task id and attempt): acquiring a lease already held
 * renews it, so an at-least-once redelivery never takes a second slot.
 */
export interface SlotLeaseRequest {
  /** The pool (`node_id/pool_id`, see `candidateKey`). */
  readonly poolKey: string;
  /** Leases the pool may have at most across the cluster (≥ 0). */
  readonly slots: number;
  readonly leaseId: string;
  /** How long the lease lasts without renewal, ms (> 0). */
  readonly ttlMs: number;
}

export type SlotAcquireOutcome =
  | { readonly kind: 'granted'; readonly expiresAt: number; readonly held: number }
  /** Every slot is leased (expired leases do not count); `held` = live leases. */
  | { readonly kind: 'full'; readonly held: number };

export interface SlotLeaseStore {
  acquire(req: SlotLeaseRequest): Promise<SlotAcquireOutcome>;
  /** Extends a live lease; false when it lapsed or was released (the slot may be someone else's now). */
  renew(poolKey: string, leaseId: string, ttlMs: number): Promise<boolean>;
  /** Gives a lease back; idempotent (false when it was not held). */
  release(poolKey: string, leaseId: string): Promise<boolean>;
  /** The ids of the pool's live leases (at most its slots, plus the leases of re-attached dispatches): whose tasks hold it. */
  list(poolKey: string): Promise<string[]>;
}
