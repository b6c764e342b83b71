import { LeaseKeeper, type LeaseHolder } from '../support/lease-keeper.js';
import { randomUUID } from 'node:crypto';
import type { Log } from '@llama-orch/daemon-support';
import type { ClusterSignals } from '../store/cluster-signals.js';
import type { SlotLeaseStore } from '../store/slot-lease-store.js';

export interface ClusterSlotLeasesOptions {
  store: SlotLeaseStore;
  logger: Log;
  /** How long a lease lives without renewal, ms; renewed on every tick of the lease keeper while its dispatch lasts. @default 15000 */
  ttlMs?: number;
  /** The cluster's lease signals: with them, {@link ClusterSlotLeasesOptions.foreign} is told what other replicas hold. */
  signals?: ClusterSignals;
  /** Other replicas hold `n` leases of the pool `poolKey` now (the registry's `setForeignLeases`). */
  foreign?: (poolKey: string, n: number) => void;
  /** The process's one renewal loop (support/lease-keeper.ts). @default a keeper of its own, every third of `ttlMs` */
  keeper?: LeaseKeeper | undefined;
}

/**
 * Slot leases shared through the cluster store (a Redis store; in-process, `pool-accounting.ts`'s
 * synchronous leases are the only ones). The scheduler still leases locally first (its own free-slot
 * arithmetic); before the dispatch leaves, the task takes a cluster lease on the pool with the
 * pool's `slots_total` as the limit, so across replicas a pool never has more dispatches than
 * slots. The leases held here are renewed together on every tick of the process's lease keeper; a replica that dies stops
 * renewing and its leases lapse after `ttlMs`, freeing their slots for the others.
 */
export class ClusterSlotLeases implements LeaseHolder {
  readonly #store: SlotLeaseStore;
  readonly #logger: Log;
  readonly #ttlMs: number;
  /** Lease id → pool key, for the leases held by this replica's dispatches. */
  readonly #held = new Map<string, string>();
  readonly #pending = new Set<Promise<unknown>>();
  /** Lease ids are unique per dispatch: a re-placed task's new lease is never the old one's release. */
  readonly #prefix = randomUUID().slice(0, 8);
  #seq = 0;
  readonly #stopRenewing: () => void;
  /** The keeper this instance made for itself (none given): closed with it. */
  readonly #ownKeeper: LeaseKeeper | undefined;
  #renewing = false;
  /**
   * This replica's leases per pool as the store has applied them, followed in the signals (which
   * come in the store's order): `held − mine` of a signal is what the others hold at that point.
   * Counts from command answers would be from another order and drift.
   */
  readonly #mineInStore = new Map<string, number>();
  readonly #foreign: ((poolKey: string, n: number) => void) | undefined;
  readonly #unsubscribe: (() => void) | undefined;

  constructor({ store, logger, ttlMs = 15_000, signals, foreign, keeper }: ClusterSlotLeasesOptions) {
    this.#store = store;
    this.#logger = logger;
    this.#ttlMs = ttlMs;
    this.#foreign = foreign;
    this.#unsubscribe = signals?.subscribe((signal) => {
      if (signal.kind !== 'lease') return;
      if (signal.leaseId.includes(`#${this.#prefix}.`)) this.#count(signal.poolKey, signal.delta);
      this.#foreign?.(signal.poolKey, signal.held - (this.#mineInStore.get(signal.poolKey) ?? 0));
    });
    this.#ownKeeper = keeper === undefined ? new LeaseKeeper({ periodMs: ttlMs / 3 }) : undefined;
    this.#stopRenewing = (keeper ?? this.#ownKeeper)!.keep(this);
  }

  /** Leases a slot of the pool for one dispatch: its lease id, or undefined when every slot is leased across the cluster. Rejects when the store does. */
  async acquire(poolKey: string, slots: number, taskId: string): Promise<string | undefined> {
    this.#seq += 1;
    const leaseId = `${taskId}#${this.#prefix}.${this.#seq}`;
    const r = await this.#store.acquire({ poolKey, slots, leaseId, ttlMs: this.#ttlMs });
    if (r.kind === 'full') return undefined;
    this.#held.set(leaseId, poolKey);
    return leaseId;
  }

  /** Gives the lease back (not awaited by the dispatch: a failed release lapses after `ttlMs`). */
  release(leaseId: string): void {
    const poolKey = this.#held.get(leaseId);
    if (poolKey === undefined) return;
    this.#held.delete(leaseId);
    this.#track(
      this.#store.release(poolKey, leaseId).catch((err: unknown) => {
        this.#logger.warn(
          {
            err,
            pool: poolKey,
            lease_id: leaseId,
            human: `Could not release a slot lease of ${poolKey}; it lapses in ${this.#ttlMs} ms`,
          },
          'slot lease release failed',
        );
      }),
    );
  }

  /**
   * The tasks holding live leases of the pool (a lease id is its task's id, `#`, and the dispatch's
   * own suffix). Rejects when the store does.
   */
  async holders(poolKey: string): Promise<string[]> {
    return [...new Set((await this.#store.list(poolKey)).map(taskOfLease))];
  }

  /**
   * Gives back every lease of task `taskId` on the pool that another replica took (one that died:
   * its dispatch holds no slot any more, or this replica re-attached to it under a lease of its
   * own), so the slot is free now, not when that lease lapses. Only for a task this replica owns
   * now (the caller's fence): the other replica cannot be renewing it. Idempotent; never rejects
   * (a lease that cannot be given back lapses after `ttlMs`).
   */
  releaseTask(poolKey: string, taskId: string): Promise<void> {
    const done = this.#store
      .list(poolKey)
      .then((ids) =>
        Promise.all(
          ids
            .filter((id) => taskOfLease(id) === taskId && !this.#held.has(id))
            .map((id) => this.#store.release(poolKey, id)),
        ),
      )
      .then(
        (released) => {
          if (released.some(Boolean))
            this.#logger.info(
              { pool: poolKey, task_id: taskId, released: released.filter(Boolean).length },
              "a dead replica's slot lease released",
            );
        },
        (err: unknown) =>
          this.#logger.warn(
            {
              err,
              pool: poolKey,
              task_id: taskId,
              human: `Could not release the slot lease of task ${taskId} on ${poolKey}; it lapses in ${this.#ttlMs} ms`,
            },
            'slot lease release failed',
          ),
      );
    this.#track(done);
    return done;
  }

  /** Leases held by this replica now. */
  get size(): number {
    return this.#held.size;
  }

  /** Stops renewing and listening, and waits for releases in flight (each bounded by the store's command timeout). */
  async close(): Promise<void> {
    this.#stopRenewing();
    await this.#ownKeeper?.close();
    this.#unsubscribe?.();
    await Promise.all([...this.#pending]);
  }

  /** Renews the leases held here (the lease keeper's tick). */
  renewHeld(): void {
    if (this.#renewing || this.#held.size === 0) return;
    this.#renewing = true;
    const leases = [...this.#held];
    const done = Promise.all(
      leases.map(([leaseId, poolKey]) =>
        this.#store.renew(poolKey, leaseId, this.#ttlMs).then(
          (alive) => {
            if (!alive && this.#held.has(leaseId))
              this.#logger.warn(
                {
                  pool: poolKey,
                  lease_id: leaseId,
                  human: `A slot lease of ${poolKey} lapsed while its dispatch ran; the slot may be granted to another task`,
                },
                'slot lease lapsed',
              );
          },
          (err: unknown) =>
            this.#logger.warn(
              { err, pool: poolKey, lease_id: leaseId, human: `Could not renew a slot lease of ${poolKey}` },
              'slot lease renew failed',
            ),
        ),
      ),
    ).finally(() => {
      this.#renewing = false;
    });
    this.#track(done);
  }

  #count(poolKey: string, delta: number): void {
    const n = (this.#mineInStore.get(poolKey) ?? 0) + delta;
    if (n > 0) this.#mineInStore.set(poolKey, n);
    else this.#mineInStore.delete(poolKey);
  }

  #track(p: Promise<unknown>): void {
    this.#pending.add(p);
    void p.finally(() => this.#pending.delete(p));
  }
}

/** The task a lease id was taken for (`acquire` names a lease `<task id>#<dispatch>`). */
function taskOfLease(leaseId: string): string {
  const at = leaseId.lastIndexOf('#');
  return at < 0 ? leaseId : leaseId.slice(0, at);
}
