/**
 * Task records with one owner at a time (the shared part of `tasks/task-record.ts`).
 *
 * Lifecycle: `queued` → `running` (dispatched) → `ended`; `running` → `queued` when an attempt
 * failed before its first token (re-placement). `ended` is final and kept `retainMs` for reads.
 *
 * Ownership is a lease with a fencing token. Admission (`TaskLifecycleStore.admit`) grants the first
 * one (fence 1), {@link TaskOwnershipStore.acquire} and {@link TaskOwnershipStore.seize} a later one,
 * each with a new fence; every transition (the lifecycle's dispatch, requeue and end) names that
 * fence and is refused (`fenced`) when another owner took the task since (the fence moved on) or
 * the lease lapsed (store clock). A replica that lost its lease can neither dispatch nor end the
 * task: it must acquire again, which gives a new fence, or let go. Leases are indexed by when they
 * lapse, so a replica finds orphaned tasks (`lapsed`) without scanning. Dispatch is idempotent per task:
 * a task already `running` answers `running`, so a redelivered dispatch never runs twice.
 */
export type StoredTaskState = 'queued' | 'running' | 'ended';

export interface StoredTask {
  readonly id: string;
  readonly state: StoredTaskState;
  readonly owner: string;
  /** When the owner's lease lapses, store clock ms. */
  readonly ownerUntil: number;
  readonly fence: number;
  /** Dispatches so far (the running one included). */
  readonly attempt: number;
  /** Opaque to the store: what the task service keeps to answer `GET /v2/tasks/{id}` anywhere. */
  readonly record: string;
  /** Where the current or last attempt runs (opaque), once dispatched. */
  readonly placement: string | undefined;
  /** The terminal outcome (opaque), once ended. */
  readonly outcome: string | undefined;
}

export interface TaskCreate {
  readonly id: string;
  readonly owner: string;
  readonly record: string;
  /** The owner's lease, ms. */
  readonly ttlMs: number;
  /**
   * Longest the task is kept if it never ends (its deadline plus the grace), ms: a task whose every
   * owner died is forgotten then instead of staying for ever.
   */
  readonly lifetimeMs: number;
}

export type Granted = { readonly ok: true; readonly fence: number; readonly ownerUntil: number };

/** Why a transition was refused. */
export type TaskRefusal =
  /** No such task (never created, or expired after it ended). */
  | { readonly ok: false; readonly reason: 'unknown' }
  /** The caller's fence is not the current one, or its lease lapsed. */
  | { readonly ok: false; readonly reason: 'fenced'; readonly owner: string; readonly fence: number }
  /** The task is not in a state that allows it (e.g. `running` for a second dispatch). */
  | { readonly ok: false; readonly reason: 'state'; readonly state: StoredTaskState };

export type AcquireOutcome =
  | Granted
  | { readonly ok: false; readonly reason: 'held'; readonly owner: string; readonly ownerUntil: number }
  | TaskRefusal;
export type TransitionOutcome = { readonly ok: true; readonly task: StoredTask } | TaskRefusal;

/** Who holds a task, under which fence (what {@link TaskOwnershipStore.seize} expects to find). */
export interface OwnedBy {
  readonly owner: string;
  readonly fence: number;
}

/** One task an owner renews, with the fence it holds. */
export interface OwnedTask {
  readonly id: string;
  readonly fence: number;
}

export interface TaskOwnershipStore {
  /**
   * Takes ownership when the task has no live owner (or `owner` holds it already): a new fence.
   * `ended` tasks cannot be taken. `record`, when given, replaces the task's record (the new
   * owner's address is in it).
   */
  acquire(id: string, owner: string, ttlMs: number, record?: string): Promise<AcquireOutcome>;
  /**
   * Takes ownership before the lease lapses, on evidence that its owner died (its advertised address
   * refuses connections while it is still a listed replica): granted only while `from` still holds
   * the task under `from.fence`, so of the replicas that see the same evidence exactly one wins, and
   * a task its owner ended or another replica took meanwhile is left alone (`fenced`, or `state`
   * for an ended one). A new fence, as with {@link acquire}.
   */
  seize(id: string, from: OwnedBy, owner: string, ttlMs: number, record?: string): Promise<AcquireOutcome>;
  /**
   * Extends the leases of all of an owner's tasks in one call (an owner renews everything it holds
   * together, so its store calls do not grow with its task count). Returns the ids it could not
   * renew (`fenced`: another owner took it or its lease had lapsed; ended or unknown tasks are
   * simply left out of the answer, nothing to renew).
   */
  renewMany(tasks: readonly OwnedTask[], ttlMs: number): Promise<string[]>;
  /**
   * Up to `limit` tasks, not ended, whose owner's lease has lapsed (store clock): orphans that a
   * live replica should take over (`acquire`), oldest lapse first.
   */
  lapsed(limit: number): Promise<string[]>;
  get(id: string): Promise<StoredTask | undefined>;
}
