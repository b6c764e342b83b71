import type { QueueEntryInput, QueueOverflowPolicy, QueuedEntry } from './admission-queue-store.js';
import type { SessionPoolRef } from './session-affinity-store.js';
import type { StoredTask, TaskCreate, TaskRefusal, TransitionOutcome } from './task-ownership-store.js';

/**
 * A task's moments with a shared store — admission, dispatch, requeue after a failed attempt,
 * end — each as ONE atomic step across the queue, the task record and the session, so each costs
 * one Redis round trip instead of two to six, and no replica ever sees a record without its entry
 * (or the reverse) in between. Every write to a task's record after its admission names the
 * caller's fence ({@link TaskOwnershipStore}: the takeovers grant a new one).
 */

/** What admission read in the store as it decided (the prediction and the session checks use it). */
export interface AdmissionView {
  /** Entries of the model a new entry of the lane would wait behind (its interactive entries; for a batch entry, its batch ones too). */
  readonly ahead: number;
  /** The session's pool of its last turn; undefined for a new or expired session. */
  readonly lastPool: SessionPoolRef | undefined;
  /** Tokens left in the session's budget; undefined = unlimited. */
  readonly budgetRemaining: number | undefined;
}

export interface TaskAdmit {
  /** The record, created `queued` with fence 1 and the owner's lease. */
  readonly task: TaskCreate;
  /** The queue entry (its id is the task's). */
  readonly entry: Omit<QueueEntryInput, 'id'>;
  /** The session whose turn starts. */
  readonly sessionId: string;
  /**
   * The most entries of the group the new one may wait behind (`AdmissionView.ahead`): more is
   * refused `late` (the caller predicted it would miss its deadline). Undefined: no limit.
   */
  readonly maxAhead?: number | undefined;
}

export type AdmitOutcome =
  /** Record, entry and the session's started turn written together; `evicted` as `AdmissionQueueStore.add`. */
  | {
      readonly kind: 'queued';
      readonly position: number;
      readonly evicted?: QueuedEntry;
      readonly fence: number;
      readonly ownerUntil: number;
      readonly view: AdmissionView;
    }
  /** The session has spent its token budget (`budgetRemaining` ≤ 0): nothing was written. */
  | { readonly kind: 'spent'; readonly view: AdmissionView }
  /** More than `maxAhead` entries of the group are ahead: nothing was written. */
  | { readonly kind: 'late'; readonly view: AdmissionView }
  /** The queue is full: nothing was written. */
  | { readonly kind: 'full'; readonly policy: QueueOverflowPolicy; readonly view: AdmissionView }
  /** A record or an entry with this id exists (a task id is unique in the cluster, and a retried admission finds its own): nothing changed. */
  | { readonly kind: 'exists' };

/**
 * The pool a dispatch holds a cluster slot lease of (its own lease counted): a task that is not first
 * of its model may go when `slots` − the pool's live leases ≥ the entries ahead of it, because then
 * no task ahead waits for the slot it takes. Order only decides who gets a contended slot; without
 * this, a task waited for the first task of its model to leave the queue even with slots free, and
 * a replica slow to take its own first task (a GC pause, a CPU quota) held every replica's tasks.
 */
export interface DispatchRoom {
  readonly poolKey: string;
  readonly slots: number;
}

export type TakeDispatchOutcome =
  /** Out of the queue and `running` under the caller's fence, together. */
  | { readonly kind: 'taken'; readonly entry: QueuedEntry; readonly task: StoredTask }
  /** An entry of the same model is ahead in dispatch order (`first`, the model's head), and no `room` lets this one pass: nothing changed. */
  | { readonly kind: 'behind'; readonly first: string }
  /** Not queued (taken, removed, evicted, or the store lost it): nothing changed. */
  | { readonly kind: 'absent' }
  /** The entry could go, but the record refuses the dispatch (`fenced`, `state`, `unknown`): nothing changed. */
  | { readonly kind: 'refused'; readonly refusal: TaskRefusal };

export interface TaskRequeue {
  readonly id: string;
  readonly fence: number;
  /** The queue entry put back (its id is the task's); `deadlineMs` from now, as at admission. */
  readonly entry: Omit<QueueEntryInput, 'id'>;
}

export interface TaskFinish {
  readonly id: string;
  readonly fence: number;
  /** The terminal outcome (opaque), kept `retainMs` for reads. */
  readonly outcome: string;
  readonly retainMs: number;
  /** The task may still be queued (ended before its dispatch): its entry leaves the queue too. */
  readonly dequeue: boolean;
  /** The session's turn ends (one active task less; `tokensOut` counted as a turn unless undefined, an error; `pool` the affinity) — whatever the record answers (a turn that ran is counted even when the lease lapsed meanwhile). */
  readonly session?: {
    readonly id: string;
    readonly tokensOut: number | undefined;
    readonly pool?: SessionPoolRef | undefined;
  };
}

export interface FinishOutcome {
  /** The record's answer: ended, or why not (nothing changed in it). */
  readonly record: TransitionOutcome;
  /** Whether an entry left the queue. */
  readonly dequeued: boolean;
}

export interface TaskLifecycleStore {
  /**
   * Admission in one step: reads what the checks need (entries ahead in the group, the session's
   * pool and budget: the answer's `view`), refuses a spent budget (`spent`), more than `maxAhead`
   * ahead (`late`), a taken id (`exists`) and a full queue (`full`) in that order, else creates the
   * record (fence 1, owner lease), queues the entry (capacity and policy) and starts the session's
   * turn — all or nothing.
   */
  admit(admit: TaskAdmit): Promise<AdmitOutcome>;
  /**
   * Takes the entry when it is its group's first in dispatch order — or, given `room`,
   * when the pool the dispatch holds a slot lease of still has a free slot for every entry ahead of
   * it — and moves the record `queued` → `running` under `fence`, both or neither.
   */
  dispatch(id: string, fence: number, placement: string, room?: DispatchRoom): Promise<TakeDispatchOutcome>;
  /**
   * An attempt failed before its first token: the record goes `running` → `queued` under `fence`
   * (it keeps the attempt's placement and count) and its entry back at the head of its lane, past
   * the capacity, both or neither: refused (`unknown`, `fenced`, `state`, in that order), nothing
   * changes — an entry put back for a task another replica took over would lead its lane with
   * nobody to take it and hold every later task of its model. An entry already queued with this id
   * stays where it is.
   */
  requeue(requeue: TaskRequeue): Promise<TransitionOutcome>;
  /**
   * The task's end in one step: the record → `ended` under its fence (from `queued` or `running`,
   * once: a second end answers `state: ended`), kept `retainMs` for reads; a still queued entry
   * leaves the queue (`dequeue`); the session's turn ends.
   */
  finish(finish: TaskFinish): Promise<FinishOutcome>;
  /**
   * On evidence that replica `from` died: of the first `limit` entries of each lane, in dispatch
   * order, those `from` queued (entry payload) whose record is `queued` and still `from`'s become
   * `owner`'s (a new fence each, a lease of `ttlMs`; their entries keep their places), in one step,
   * so replicas that found `from` dead at once never split its queued tasks (each would dispatch its
   * share in its own order). Returns them in dispatch order.
   */
  seizeQueued(
    from: string,
    owner: string,
    ttlMs: number,
    limit: number,
  ): Promise<Array<{ readonly id: string; readonly fence: number }>>;
}
