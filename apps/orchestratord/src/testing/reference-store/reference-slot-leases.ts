import type { Clock } from '@llama-orch/daemon-support';
import type { ReferenceSignals } from './reference-signals.js';
import type { SlotAcquireOutcome, SlotLeaseRequest, SlotLeaseStore } from '../../store/slot-lease-store.js';

/** Slot leases in memory (the reference model of `SlotLeaseStore`): lease id → expiry per pool; expired leases are purged on each touch. */
export class ReferenceSlotLeases implements SlotLeaseStore {
  readonly #pools = new Map<string, Map<string, number>>();
  readonly #clock: Clock;
  readonly #signals: ReferenceSignals | undefined;

  constructor(clock: Clock, signals?: ReferenceSignals) {
    this.#clock = clock;
    this.#signals = signals;
  }

  #live(poolKey: string, now: number): Map<string, number> | undefined {
    const leases = this.#pools.get(poolKey);
    if (leases === undefined) return undefined;
    for (const [id, until] of leases) if (until <= now) leases.delete(id);
    if (leases.size === 0) this.#pools.delete(poolKey);
    return leases.size === 0 ? undefined : leases;
  }

  acquire({ poolKey, slots, leaseId, ttlMs }: SlotLeaseRequest): Promise<SlotAcquireOutcome> {
    const now = this.#clock.now();
    const leases = this.#live(poolKey, now) ?? new Map<string, number>();
    const expiresAt = now + ttlMs;
    if (!leases.has(leaseId) && leases.size >= slots) return Promise.resolve({ kind: 'full', held: leases.size });
    const renewal = leases.has(leaseId);
    leases.set(leaseId, expiresAt);
    this.#pools.set(poolKey, leases);
    if (!renewal) this.#signals?.emit({ kind: 'lease', poolKey, held: leases.size, leaseId, delta: 1 });
    return Promise.resolve({ kind: 'granted', expiresAt, held: leases.size });
  }

  renew(poolKey: string, leaseId: string, ttlMs: number): Promise<boolean> {
    const now = this.#clock.now();
    const leases = this.#live(poolKey, now);
    if (leases?.has(leaseId) !== true) return Promise.resolve(false);
    leases.set(leaseId, now + ttlMs);
    return Promise.resolve(true);
  }

  release(poolKey: string, leaseId: string): Promise<boolean> {
    const leases = this.#live(poolKey, this.#clock.now());
    const had = leases?.delete(leaseId) === true;
    if (leases?.size === 0) this.#pools.delete(poolKey);
    if (had) this.#signals?.emit({ kind: 'lease', poolKey, held: leases?.size ?? 0, leaseId, delta: -1 });
    return Promise.resolve(had);
  }

  /** Live leases of the pool (the reference dispatch's room). */
  heldNow(poolKey: string): number {
    return this.#live(poolKey, this.#clock.now())?.size ?? 0;
  }

  list(poolKey: string): Promise<string[]> {
    return Promise.resolve([...(this.#live(poolKey, this.#clock.now())?.keys() ?? [])]);
  }
}
