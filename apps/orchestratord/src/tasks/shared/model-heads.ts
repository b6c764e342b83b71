import type { Clock } from '@llama-orch/daemon-support';
import type { TakeDispatchOutcome } from '../../store/task-lifecycle-store.js';

/** What this replica knows of a model's first queued task in the cluster's queue. */
interface Head {
  /** Its id (undefined: not known). */
  readonly id: string | undefined;
  /** Its owner (undefined: not known). */
  readonly owner: string | undefined;
  /** When heard (the clock's time). */
  readonly at: number;
  /** Whether this replica's last take of the model was answered `behind`. */
  readonly behind: boolean;
}

/**
 * Each model's first queued task, from the queue signals and `behind` answers, and whether this
 * replica's tasks of the model wait for it: only after a take of the model was answered `behind`
 * (no room to pass), while the first task is known to be another replica's, heard within `blockMs`
 * (older knowledge is not trusted: a take finds out, so a lost signal costs a round trip).
 */
export class ModelHeads {
  readonly #heads = new Map<string, Head>();

  constructor(
    readonly replicaId: string,
    readonly blockMs: number,
    readonly clock: Clock,
  ) {}

  /** A queue signal: `head` (owned by `owner`) leads the model's queue. True when it has just become this replica's. */
  heard(group: string, head: string | undefined, owner: string | undefined): boolean {
    const before = this.#heads.get(group);
    this.#heads.set(group, { id: head, owner, at: this.clock.now(), behind: before?.behind ?? false });
    return owner === this.replicaId && (before?.id !== head || before?.owner !== this.replicaId);
  }

  /** Whether the model's tasks here wait (see the class). */
  blocked(group: string): boolean {
    const h = this.#heads.get(group);
    if (h === undefined || !h.behind || h.id === undefined || h.owner === this.replicaId) return false;
    return this.clock.now() - h.at <= this.blockMs;
  }

  /** The model's first task (`first`) is this replica's own: no need to wait for the queue to move. */
  unblock(group: string, first: string): void {
    this.#heads.set(group, {
      id: first,
      owner: this.replicaId,
      at: this.clock.now(),
      behind: this.#heads.get(group)?.behind ?? false,
    });
  }

  /** A take of the model was answered: `behind` (first: the task ahead) blocks it, `taken` clears the block. */
  took(group: string, kind: TakeDispatchOutcome['kind'], first?: string): void {
    const h = this.#heads.get(group);
    if (kind === 'behind') this.#heads.set(group, { id: first, owner: undefined, at: this.clock.now(), behind: true });
    else if (kind === 'taken' && h?.behind === true) this.#heads.set(group, { ...h, behind: false });
  }
}
