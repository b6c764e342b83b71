/**
 * The cluster's admission queue: one capacity, two priority lanes, FIFO by admission order within
 * a lane across replicas (the twin of `admission/admission-queue.ts`, whose semantics it keeps).
 * Entries come and go with their task's lifecycle steps (`TaskLifecycleStore`: admit, dispatch,
 * finish); this interface holds the rest.
 *
 * - Every `interactive` entry of a model goes before any `batch` entry of it.
 * - Admission order is the order in which the store took the entries (one sequence for the
 *   cluster), not a replica's clock.
 * - When full, `reject` refuses the new entry; `drop-lru` evicts the oldest `batch` entry and
 *   returns it (the caller must notify that task: nothing is dropped silently), refusing only when
 *   no batch entry exists.
 * - A requeue (`TaskLifecycleStore.requeue`) puts an admitted entry back at the head of its lane
 *   (re-placement after an engine failure), past the capacity if need be.
 * - Each entry is taken or removed by exactly one caller.
 */
export type QueueLane = 'interactive' | 'batch';
export type QueueOverflowPolicy = 'reject' | 'drop-lru';

export interface QueueEntryInput {
  readonly id: string;
  readonly lane: QueueLane;
  /** What dispatch order is kept per (the model ref). */
  readonly group: string;
  /** Opaque to the store (the task service serialises what it needs). */
  readonly payload: string;
  /** Expires this many ms after it is queued (store clock); absent = never. */
  readonly deadlineMs?: number | undefined;
}

export interface QueuedEntry {
  readonly id: string;
  readonly lane: QueueLane;
  readonly group: string;
  readonly payload: string;
  /** Absolute expiry, store clock ms; `Infinity` = never. */
  readonly deadlineAt: number;
}

export type QueueAddOutcome =
  | { readonly kind: 'queued'; readonly position: number; readonly evicted?: QueuedEntry }
  | { readonly kind: 'full'; readonly policy: QueueOverflowPolicy }
  /** The id is queued already (an at-least-once retry of the admission): nothing changed. */
  | { readonly kind: 'duplicate' };

/** Whether an entry may leave the queue for a dispatch (the queue's half of `TaskLifecycleStore.dispatch`). */
export type QueueTakeOutcome =
  | { readonly kind: 'taken'; readonly entry: QueuedEntry }
  /** An entry of the same group is ahead in dispatch order (`first`, the group's head): it goes first. */
  | { readonly kind: 'behind'; readonly first: string }
  /** Not queued (taken, removed, expired, evicted, or the store lost it). */
  | { readonly kind: 'absent' };

/** How long `gone` reports an eviction (owners look every second or so). */
export const EVICTED_KEPT_MS = 600_000;

/** An entry that left the queue without its caller taking or removing it. */
export interface GoneEntry {
  readonly id: string;
  /** `drop-lru` evicted it for a newer entry (kept 10 min); false = expired by another caller, or lost with the store's data. */
  readonly evicted: boolean;
}

export interface QueueSizes {
  readonly interactive: number;
  readonly batch: number;
}

/**
 * What the shared queue answers besides a task's lifecycle steps (`TaskLifecycleStore`, which admits,
 * takes, requeues and ends entries): an owner's look for its entries that left without it, a
 * cancel, and the dashboard's counts.
 */
export interface AdmissionQueueStore {
  /** Of `ids` (the caller's queued tasks), those no longer in the queue, in the order given. */
  gone(ids: readonly string[]): Promise<GoneEntry[]>;
  /** Removes an entry by id (cancel). */
  remove(id: string): Promise<QueuedEntry | undefined>;
  /** Entries per lane. */
  sizes(): Promise<QueueSizes>;
}
