import type { Clock, Log } from '@llama-orch/daemon-support';
import type { TaskOwnershipStore } from '../../store/task-ownership-store.js';

export interface OwnerLeasesOptions {
  tasks: Pick<TaskOwnershipStore, 'renewMany'>;
  /** Owner lease of a task, ms. */
  ownerTtlMs: number;
  clock: Clock;
  logger: Log;
  /** Keeps a store write nobody waits for (logged when it fails, awaited on close). */
  track: (p: Promise<unknown>) => void;
}

/**
 * The owner leases a replica holds on its tasks: each task's fence, their renewal (one call for all
 * of them, on the lease keeper's tick), and the tasks let go — a renewal refused (another replica
 * took the task over) or none reaching the store for a whole lease — with the fence they had and
 * when, until they end here or are granted back ({@link OwnerLeases.takeBack}).
 */
export class OwnerLeases {
  readonly #o: OwnerLeasesOptions;
  /** Fences of the tasks this replica owns. */
  readonly #fences = new Map<string, number>();
  /** Tasks let go that have not ended here yet: the fence they had (their end writes only if no other replica took them) and when (the clock's time). */
  readonly #lost = new Map<string, { readonly fence: number; readonly at: number }>();
  readonly #lostListeners = new Set<(ids: readonly string[]) => void>();
  #renewing = false;
  /** When renewals last reached the store (or there was nothing to renew). */
  #renewedAt: number;

  constructor(options: OwnerLeasesOptions) {
    this.#o = options;
    this.#renewedAt = options.clock.now();
  }

  /** The task is this replica's under `fence` (admitted, or taken over): renewed from now on. */
  hold(id: string, fence: number): void {
    this.#fences.set(id, fence);
  }

  /** The fence this replica holds the task under; 0 (refused by every record) when it holds none. */
  fence(id: string): number {
    return this.#fences.get(id) ?? 0;
  }

  /** Whether this replica let the task go and has not taken it back. */
  isLost(id: string): boolean {
    return this.#lost.has(id);
  }

  /** How long ago this replica let the task go, ms; undefined when it holds it (or never did). */
  lostFor(id: string): number | undefined {
    const at = this.#lost.get(id)?.at;
    return at === undefined ? undefined : this.#o.clock.now() - at;
  }

  /** Granted back to this replica that let it go: true when it had (it holds it under `fence` again). */
  takeBack(id: string, fence: number): boolean {
    if (!this.#lost.delete(id)) return false;
    this.#fences.set(id, fence);
    return true;
  }

  /** Nothing of the task is this replica's any more (handed off to another). */
  forget(id: string): void {
    this.#fences.delete(id);
    this.#lost.delete(id);
  }

  /**
   * The task ends here: its lease is no longer renewed. `fence` to write the end under (0 when this
   * replica holds none), or `formerFence` when it was let go (the end takes it back first).
   */
  release(id: string): { fence: number | undefined; formerFence: number | undefined } {
    const formerFence = this.#lost.get(id)?.fence;
    this.#lost.delete(id);
    const fence = formerFence !== undefined ? undefined : this.fence(id);
    this.#fences.delete(id);
    return { fence, formerFence };
  }

  /** Tasks this replica held and lost. Returns the unsubscribe function. */
  onLost(listener: (ids: readonly string[]) => void): () => void {
    this.#lostListeners.add(listener);
    return () => this.#lostListeners.delete(listener);
  }

  /**
   * One call for every task held here. A task another replica took over is let go (this replica can
   * no longer end it); so is every task once renewals have failed for a whole lease.
   */
  renewHeld(): void {
    const { clock, ownerTtlMs, logger } = this.#o;
    if (this.#fences.size === 0) {
      this.#renewedAt = clock.now();
      return;
    }
    // No renewal has reached the store for a whole lease (failed, or still waiting on a silent
    // connection): another replica takes these tasks over now.
    if (clock.now() - this.#renewedAt > ownerTtlMs) {
      const lost = [...this.#fences.keys()];
      logger.warn(
        {
          tasks: lost.length,
          human: `Cannot renew ${lost.length} task(s) for longer than their lease: another replica takes them over; this replica lets them go`,
        },
        'lost ownership of tasks: cluster store unreachable',
      );
      this.#letGo(lost);
      return;
    }
    if (this.#renewing) return;
    this.#renewing = true;
    const owned = [...this.#fences].map(([id, fence]) => ({ id, fence }));
    const done = this.#o.tasks
      .renewMany(owned, ownerTtlMs)
      .then((refused) => {
        this.#renewedAt = clock.now();
        const lost = refused.filter((id) => this.#fences.get(id) === owned.find((t) => t.id === id)?.fence);
        for (const id of lost) {
          logger.warn(
            {
              task_id: id,
              human: `Lost task ${id} to another replica (its lease here lapsed); this replica no longer ends it`,
            },
            'lost ownership of a task',
          );
        }
        this.#letGo(lost);
      })
      .finally(() => {
        this.#renewing = false;
      });
    this.#o.track(done);
  }

  #letGo(ids: readonly string[]): void {
    if (ids.length === 0) return;
    for (const id of ids) {
      this.#lost.set(id, { fence: this.fence(id), at: this.#o.clock.now() });
      this.#fences.delete(id);
    }
    for (const l of this.#lostListeners) l(ids);
  }
}
