import type { Lease, PoolView } from '../registry/pool-view.js';
import type { NodeRegistry } from '../registry/node-registry.js';
import {
  place,
  type PrefixScorer,
  type PlacementDecision,
  type PlacementReason,
  type PlacementStrategy,
  type RoundRobinCursor,
} from './placement.js';
import type { PlacementTicket } from './placement-ticket.js';

/** A queued task as the scheduler sees it. */
export interface Schedulable {
  readonly id: string;
  readonly ticket: PlacementTicket;
}

/** The waiting line the scheduler takes tasks from (the admission queue), in dispatch order. */
export interface WaitingLine<T> extends Iterable<{ readonly item: T }> {
  readonly size: number;
  remove(id: string): unknown;
}

/** What the scheduler reports; each is called synchronously inside `pump()`. */
export interface SchedulerEvents<T> {
  /** The task found no free slot for the first time (it stays in line). */
  waiting(task: T): void;
  /** No pool can ever take the task (it left the line). */
  unplaceable(task: T, decision: Extract<PlacementDecision, { kind: 'reject' }>): void;
  /** The task left the line with a slot of `view` leased for it. */
  assigned(task: T, view: PoolView, lease: Lease, reason: PlacementReason): void;
  /** A pass took tasks out of the line (positions of the others changed). */
  moved(): void;
}

export interface SchedulerOptions<T> {
  registry: NodeRegistry;
  strategy: PlacementStrategy;
  line: WaitingLine<T>;
  events: SchedulerEvents<T>;
  /**
   * Whether tasks of a model no pool lists wait for it instead of being refused (a catalog model
   * waiting for room on a node, spec 67). Asked only on that refusal's path. @default never
   */
  awaitingModel?: (modelRef: string) => boolean;
  /** The prefix index `cache-aware` placement reads. @default none (cache-aware places as least-loaded) */
  scorer?: PrefixScorer | undefined;
}

/**
 * The pump: places queued tasks on free slots, in dispatch order. Synchronous, and every slot is
 * leased inside it before the next decision reads the registry, so two tasks never get one slot.
 * Tasks with the same wait key share a decision: once one of them must wait, the rest of its kind
 * are skipped for this pass, while tasks for other models behind them are still placed.
 */
export class Scheduler<T extends Schedulable> {
  readonly #registry: NodeRegistry;
  readonly #strategy: PlacementStrategy;
  readonly #line: WaitingLine<T>;
  readonly #events: SchedulerEvents<T>;
  readonly #awaitingModel: (modelRef: string) => boolean;
  readonly #scorer: PrefixScorer | undefined;
  readonly #cursor: RoundRobinCursor = { next: 0 };
  #open = true;
  #pumping = false;
  #pumpAgain = false;

  constructor({ registry, strategy, line, events, awaitingModel, scorer }: SchedulerOptions<T>) {
    this.#registry = registry;
    this.#scorer = scorer;
    this.#awaitingModel = awaitingModel ?? (() => false);
    this.#strategy = strategy;
    this.#line = line;
    this.#events = events;
  }

  /** Safe to call any time, from inside the events too (the running pass goes round once more). */
  pump(): void {
    if (!this.#open || this.#line.size === 0) return;
    if (this.#pumping) {
      this.#pumpAgain = true;
      return;
    }
    this.#pumping = true;
    let moved = false;
    try {
      do {
        this.#pumpAgain = false;
        if (this.#pass()) moved = true;
      } while (this.#pumpAgain && this.#open);
    } finally {
      this.#pumping = false;
    }
    if (moved) this.#events.moved();
  }

  /** No more passes. */
  close(): void {
    this.#open = false;
  }

  #pass(): boolean {
    let moved = false;
    const waiting = new Set<string>();
    for (const entry of this.#line) {
      const task = entry.item;
      const ticket = task.ticket;
      const key = ticket.waitKey;
      if (waiting.has(key)) continue;
      // The registry's per-model index: only the model's pools are looked at, and the lease taken
      // below is in the views the next decision reads.
      const decision = place(ticket, this.#registry, this.#strategy, this.#cursor, this.#scorer);
      if (
        decision.kind === 'wait' ||
        (decision.kind === 'reject' && decision.code === 'MODEL_NOT_AVAILABLE' && this.#awaitingModel(ticket.model_ref))
      ) {
        waiting.add(key);
        if (!ticket.waited) {
          ticket.waited = true;
          this.#events.waiting(task);
        }
        continue;
      }
      this.#line.remove(task.id);
      moved = true;
      if (decision.kind === 'reject') {
        this.#events.unplaceable(task, decision);
        continue;
      }
      const view = decision.candidate;
      this.#events.assigned(task, view, this.#registry.lease(view.node_id, view.pool_id), decision.reason);
    }
    return moved;
  }
}
