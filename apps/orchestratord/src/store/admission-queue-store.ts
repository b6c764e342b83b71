/**
 * The cluster's admission queue: one capacity, two priority lanes, FIFO by admission order within
 * a lane across replicas (the twin of `admission/admission-queue.ts`, whose semantics it keeps).
 *
 * - Every `interactive` entry is claimed before any `batch` entry (of the groups asked for).
 * - Admission order is the order in which the store took the entries (one sequence for the
 *   cluster), not a replica's clock.
 * - When full, `reject` refuses the new entry; `drop-lru` evicts the oldest `batch` entry and
 *   returns it (the caller must notify that task: nothing is dropped silently), refusing only when
 *   no batch entry exists.
 * - `requeueFront` puts an admitted entry back at the head of its lane (re-placement after an
 *   engine failure), past the capacity if need be.
 * - Each entry is claimed, removed or expired by exactly one caller.
 */
export type QueueLane = 'interactive' | 'batch';
export type QueueOverflowPolicy = 'reject' | 'drop-lru';

export interface QueueEntryInput {
  readonly id: string;
  readonly lane: QueueLane;
  /** What the scheduler claims by (the model ref). */
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

/** What {@link AdmissionQueueStore.take} answers. */
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

export interface AdmissionQueueStore {
  readonly capacity: number;
  readonly policy: QueueOverflowPolicy;
  add(entry: QueueEntryInput): Promise<QueueAddOutcome>;
  /** Puts an admitted entry back at the head of its lane (ignores capacity); false for a duplicate id. */
  requeueFront(entry: QueueEntryInput): Promise<boolean>;
  /**
   * Removes and returns the first entry in dispatch order whose group is in `groups` (all groups
   * when absent): the scheduler asks for the models a free pool serves, so a task no free pool can
   * run does not block tasks behind it.
   */
  claim(groups?: readonly string[]): Promise<QueuedEntry | undefined>;
  /**
   * Removes `id` only when it is the first entry of its group in dispatch order. Replicas dispatch
   * the tasks they admitted (their clients are connected to them), so each asks for its own task
   * when it has a slot for it, and the cluster's order still decides: a batch task of a model
   * waits while an interactive one of that model is queued on any replica.
   */
  take(id: string): Promise<QueueTakeOutcome>;
  /** Of `ids` (the caller's queued tasks), those no longer in the queue, in the order given. */
  gone(ids: readonly string[]): Promise<GoneEntry[]>;
  /** The first `limit` entries of each lane, in dispatch order, left queued (the orphan sweep reads their owners). */
  heads(limit: number): Promise<QueuedEntry[]>;
  /** Removes an entry by id (cancel). */
  remove(id: string): Promise<QueuedEntry | undefined>;
  /** 0-based position in dispatch order; undefined when absent. */
  position(id: string): Promise<number | undefined>;
  /** Entries of `group` that a new entry in `lane` would wait behind. */
  countAhead(group: string, lane: QueueLane): Promise<number>;
  sizes(): Promise<QueueSizes>;
  /** Removes and returns the entries whose deadline passed (store clock), in dispatch order. */
  takeExpired(): Promise<QueuedEntry[]>;
}
