import type { Clock, Log } from '@llama-orch/daemon-support';
import type { TaskOwnershipStore } from '../../store/task-ownership-store.js';
import type { TaskLifecycle } from '../task-lifecycle.js';

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
 * The owner leases a replica holds on its tasks: an index of their lifecycles (each one's
 * {@link TaskLifecycle.ownership} — fence, or let go with the fence it had and when — is the task's
 * own), their renewal (one call for all of them, on the lease keeper's tick), and letting go of
 * those whose renewal was refused (another replica took them over) or none reached the store for a
 * whole lease, until they end here or are granted back ({@link OwnerLeases.takeBack}).
 */
export class OwnerLeases {
  readonly #o: OwnerLeasesOptions;
  /** The tasks this replica holds or let go, by id. */
  readonly #tasks = new Map<string, TaskLifecycle>();
  readonly #lostListeners = new Set<(ids: readonly string[]) => void>();
  #renewing = false;
  /** When renewals last reached the store (or there was nothing to renew). */
  #renewedAt: number;

  constructor(options: OwnerLeasesOptions) {
    this.#o = options;
    this.#renewedAt = options.clock.now();
  }

  /** The task (`life`) is this replica's under `fence` (admitted, or taken over): renewed from now on. */
  hold(id: string, life: TaskLifecycle, fence: number): void {
    life.hold(fence);
    this.#tasks.set(id, life);
  }

  /** Whether this replica let the task go and has not taken it back. */
  isLost(id: string): boolean {
    return this.#tasks.get(id)?.lost === true;
  }

  /** How long ago this replica let the task go, ms; undefined when it holds it (or never did). */
  lostFor(id: string): number | undefined {
    const owned = this.#tasks.get(id)?.ownership;
    return owned?.kind === 'lost' ? this.#o.clock.now() - owned.at : undefined;
  }

  /** Granted back to this replica that let it go: true when it had (it holds it under `fence` again). */
  takeBack(id: string, fence: number): boolean {
    const life = this.#tasks.get(id);
    if (life?.lost !== true) return false;
    life.hold(fence);
    return true;
  }

  /** Nothing of the task is this replica's any more (handed off to another). */
  forget(id: string): void {
    this.#tasks.get(id)?.release();
    this.#tasks.delete(id);
  }

  /**
   * The task ends here: its lease is no longer renewed. `fence` to write the end under (0 when this
   * replica holds none), or `formerFence` when it was let go (the end takes it back first).
   */
  release(id: string): { fence: number | undefined; formerFence: number | undefined } {
    const life = this.#tasks.get(id);
    this.#tasks.delete(id);
    return life?.release() ?? { fence: 0, formerFence: undefined };
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
    const held = [...this.#tasks].filter(([, life]) => life.ownership.kind === 'held');
    if (held.length === 0) {
      this.#renewedAt = clock.now();
      return;
    }
    // No renewal has reached the store for a whole lease (failed, or still waiting on a silent
    // connection): another replica takes these tasks over now.
    if (clock.now() - this.#renewedAt > ownerTtlMs) {
      logger.warn(
        {
          tasks: held.length,
          human: `Cannot renew ${held.length} task(s) for longer than their lease: another replica takes them over; this replica lets them go`,
        },
        'lost ownership of tasks: cluster store unreachable',
      );
      this.#letGo(held.map(([id]) => id));
      return;
    }
    if (this.#renewing) return;
    this.#renewing = true;
    const owned = held.map(([id, life]) => ({ id, fence: life.fence }));
    const done = this.#o.tasks
      .renewMany(owned, ownerTtlMs)
      .then((refused) => {
        this.#renewedAt = clock.now();
        // Only those still held under the fence the renewal named (not ended, released or taken back meanwhile).
        const lost = refused.filter((id) => {
          const fence = this.#tasks.get(id)?.fence;
          return fence !== undefined && fence !== 0 && fence === owned.find((t) => t.id === id)?.fence;
        });
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
    const now = this.#o.clock.now();
    for (const id of ids) this.#tasks.get(id)?.letGo(now);
    for (const l of this.#lostListeners) l(ids);
  }
}
