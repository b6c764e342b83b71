import type { SlotAcquireOutcome, SlotLeaseRequest, SlotLeaseStore } from '../slot-lease-store.js';
import type { RedisScripts } from './redis-scripts.js';

/** Slot leases of each pool in Redis (lua/includes/slot-leases.lua, lua/lease-*.lua); a new and a released lease are signalled. */
export class RedisSlotLeases implements SlotLeaseStore {
  readonly #scripts: RedisScripts;

  constructor(scripts: RedisScripts) {
    this.#scripts = scripts;
  }

  acquire(request: SlotLeaseRequest): Promise<SlotAcquireOutcome> {
    return this.#scripts.leaseAcquire(request);
  }

  renew(poolKey: string, leaseId: string, ttlMs: number): Promise<boolean> {
    return this.#scripts.leaseRenew(poolKey, leaseId, ttlMs);
  }

  release(poolKey: string, leaseId: string): Promise<boolean> {
    return this.#scripts.leaseRelease(poolKey, leaseId);
  }

  list(poolKey: string): Promise<string[]> {
    return this.#scripts.leaseList(poolKey);
  }
}
