import type { SseFrame } from '@llama-orch/contracts';
import type { Lease, PoolView } from '../registry/pool-view.js';
import type { PlacementReason } from '../scheduling/placement.js';
import type { WaitingLine } from '../scheduling/scheduler.js';
import type { SessionPool, SessionStore } from '../sessions/session-store.js';
import type { AttemptOutcome } from '../upstream/dispatch-attempt.js';
import type {
  Admission,
  AdmissionSteps,
  Admitted,
  CoordinatorFactory,
  CoordinatorHost,
  TaskCoordinator,
} from './task-coordinator.js';
import type { TaskRecord } from './task-record.js';

/**
 * One orchestratord and nobody else: this process's queue is the whole queue (its capacity and
 * policy decide admission), sessions live in this process's {@link SessionStore}, a slot the
 * scheduler leased is the task's at once, and an end is delivered as it is written. Every moment
 * is synchronous inside: admission has enqueued (and dispatched, when a slot is free) before its
 * promise settles.
 */
export class LocalCoordinator implements TaskCoordinator {
  readonly runningFrames = true;
  readonly reattachMs = undefined;
  readonly #sessions: SessionStore;
  readonly #host: CoordinatorHost;

  /** The factory of a task service in one process: its queue holds `admissionCapacity`. */
  static factory(options: { sessions: SessionStore; admissionCapacity: number }): CoordinatorFactory {
    return { localCapacity: options.admissionCapacity, create: (host) => new LocalCoordinator(options.sessions, host) };
  }

  constructor(sessions: SessionStore, host: CoordinatorHost) {
    this.#sessions = sessions;
    this.#host = host;
  }

  async admit(a: Admission, steps: AdmissionSteps): Promise<Admitted> {
    const { request } = a;
    const queue = this.#host.queue;
    const id = request.session_id;
    const session = { lastPool: this.#sessions.lastPool(id), budgetRemaining: this.#sessions.budgetRemaining(id) };
    const { avail, prediction, task } = steps.prepare(
      a,
      queue.countAhead(request.model_ref, request.priority),
      session,
    );
    const result = queue.enqueue(task.id, request.priority, task, task.deadlineAt);
    if (result.kind === 'full') throw steps.queueFull(task, result.policy, prediction, queue.size);
    // Started before anything can end it (`accepted` pumps, and a pump may dispatch and end it).
    this.#sessions.taskStarted(id);
    return steps.accepted(task, result.position, avail, prediction, result.evicted?.item);
  }

  line(): WaitingLine<TaskRecord> {
    return this.#host.queue;
  }

  assigned(task: TaskRecord, view: PoolView, lease: Lease, reason: PlacementReason): void {
    this.#host.dispatch(task, view, lease, reason);
  }

  claiming(): undefined {
    return undefined;
  }

  attempt(
    _task: TaskRecord,
    _view: PoolView,
    _resume: boolean,
    _held: string | undefined,
    run: () => Promise<AttemptOutcome>,
  ): Promise<AttemptOutcome> {
    return run();
  }

  settle(_task: TaskRecord, _outcome: AttemptOutcome, settle: () => void): void {
    settle();
  }

  requeue(task: TaskRecord): void {
    this.#host.requeued(task);
  }

  ended(
    task: TaskRecord,
    frame: SseFrame,
    served: SessionPool | undefined,
    _queued: boolean,
    deliver: () => void,
  ): void {
    deliver();
    this.#sessions.taskEnded(
      task.request.session_id,
      frame.event === 'end' ? frame.data.tokens_out : undefined,
      served,
    );
  }

  movedAway(): void {
    // No other replica takes a task over from this one.
  }

  abortHeld(): void {
    // No node holds a dispatch for a re-attach: nothing dispatched here asked for one.
  }

  tick(): void {
    // Nothing of the cluster to look after.
  }

  close(): Promise<void> {
    return Promise.resolve();
  }
}
