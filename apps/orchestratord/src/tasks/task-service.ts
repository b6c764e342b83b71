import type { ErrorCode, SseFrame, TaskRequest } from '@llama-orch/contracts';
import { AdmissionQueue } from '../admission/admission-queue.js';
import { Predictor } from '../admission/predictor.js';
import type { NodeRegistry } from '../registry/node-registry.js';
import type { Lease, PoolView } from '../registry/pool-view.js';
import { Scheduler } from '../scheduling/scheduler.js';
import type { PlacementReason } from '../scheduling/placement.js';
import type { Clock, Log } from '@llama-orch/daemon-support';
import { AttemptAbort } from '../upstream/attempt-abort.js';
import { runAnswerAttempt } from '../upstream/answer-attempt.js';
import { runAttempt, type AttemptOutcome } from '../upstream/dispatch-attempt.js';
import type { PoolClient } from '../upstream/pool-client.js';
import { InFlight } from './in-flight.js';
import { abandonNode, abandonSilentDispatches, applyPenalty } from './node-faults.js';
import { QueueMetrics } from './queue-metrics.js';
import { TaskEvents, type TaskEventListener } from './task-events.js';
import { taskLoad, tokensRelayed, type TaskLoad } from './task-load.js';
import { TaskObserver, type CancelReason } from './task-observer.js';
import { answerSink } from './answer-sink.js';
import { TaskAdmission } from './task-admission.js';
import {
  canceledEnd,
  dispatchRequest,
  endOf,
  placementOf,
  type Delivery,
  type RetainedTask,
  type TaskRecord,
} from './task-record.js';
import type { Adoption } from './shared/shared-task-types.js';
import { adoptInto, adoptedTask, reattaching } from './shared/adoption.js';
import type { AdmissionSource, CoordinatorHost, TaskCoordinator } from './task-coordinator.js';
import { tokenSink } from './token-sink.js';
import { TaskTable } from './task-table.js';
import type { Admitted, CancelResult, TaskServiceOptions, TaskServiceState } from './task-service-types.js';

/**
 * The data plane's front: admits tasks, runs them through the scheduler and the dispatch attempt,
 * and ends them. Invariants:
 * - every admitted task ends with exactly one terminal frame (`end` or `error`), whatever happens
 *   (node loss, cancel, disconnect, deadline, eviction, shutdown): all endings go through `#end`;
 * - slots are leased synchronously inside the scheduler's `pump()`, so two tasks never get one slot;
 * - a task is re-placed at most `maxRetries` times, and only before its first token (the failure
 *   policy of upstream/dispatch-attempt.ts decides; this class applies its outcome).
 */

export type {
  TaskServiceOptions,
  AdmissionResult,
  Admitted,
  CancelResult,
  CancelReason,
  TaskLoad,
  TaskServiceState,
} from './task-service-types.js';

const ENGINE = 'llamacpp';

export class TaskService {
  readonly #registry: NodeRegistry;
  readonly #prefixes: TaskServiceOptions['prefixes'];
  /** The cluster's side of every moment of a task (task-coordinator.ts). */
  readonly #coordinator: TaskCoordinator;
  readonly #poolClient: PoolClient;
  readonly #clock: Clock;
  readonly #ctxMax: number;
  readonly #maxRetries: number;
  readonly #closeTimeoutMs: number;
  readonly #tracer: TaskServiceOptions['tracer'];
  readonly #metricsIntervalMs: number;
  readonly #admission: TaskAdmission;
  readonly #predictor = new Predictor();
  readonly #events = new TaskEvents();
  readonly #observer: TaskObserver;
  readonly #table: TaskTable;
  readonly #queue: AdmissionQueue<TaskRecord>;
  readonly #scheduler: Scheduler<TaskRecord>;
  readonly #queueMetrics: QueueMetrics;
  readonly #inflight = new InFlight();
  readonly #tick: NodeJS.Timeout;
  readonly #unsubscribe: () => void;
  #state: TaskServiceState = 'running';
  /** False once a drain stopped admission (`stopAdmission`); dispatch and housekeeping go on. */
  #admitting = true;
  #closing: Promise<void> | undefined;
  /** Token frames relayed by tasks that have ended (see {@link tokensRelayed}). */
  #tokensEnded = 0;

  constructor(options: TaskServiceOptions) {
    const { registry, metrics, tickMs = 100, metricsIntervalMs = 1000 } = options;
    this.#registry = registry;
    this.#prefixes = options.prefixes;
    this.#poolClient = options.poolClient;
    this.#clock = options.clock;
    this.#ctxMax = options.ctxMax;
    this.#maxRetries = options.maxRetries ?? 1;
    this.#closeTimeoutMs = options.closeTimeoutMs ?? 2000;
    this.#tracer = options.tracer;
    this.#metricsIntervalMs = metricsIntervalMs;
    this.#observer = new TaskObserver(metrics, this.#predictor, this.#events, options.journal);
    this.#table = new TaskTable({ graceMs: options.streamGraceMs, maxEnded: options.streamGraceMaxTasks ?? 100_000 });
    // Where the cluster's queue holds the capacity and the policy, this one mirrors the tasks queued here.
    this.#queue = new AdmissionQueue<TaskRecord>({
      capacity: options.coordinator.localCapacity,
      policy: options.admissionPolicy,
      groupOf: (t) => t.request.model_ref,
    });
    const host: CoordinatorHost = {
      queue: this.#queue,
      table: this.#table,
      dispatch: (task, view, lease, reason, held) => this.#placed(task, view, lease, reason, held),
      fail: (task, code, message, retriable) => this.#fail(task, code, message, retriable),
      pump: () => this.#scheduler.pump(),
      adopt: (a) => this.#adopt(a),
      requeued: (task) => this.#requeued(task),
      handOff: (task, to) => this.#end(task, { movedTo: to }),
      crashed: (task, err) => this.#crashed(task, err),
    };
    const coordinator = options.coordinator.create(host);
    this.#coordinator = coordinator;
    this.#queueMetrics = new QueueMetrics({
      registry,
      predictor: this.#predictor,
      intervalMs: metricsIntervalMs,
      runningFrames: coordinator.runningFrames,
    });
    this.#scheduler = new Scheduler<TaskRecord>({
      registry,
      strategy: options.placementStrategy,
      line: coordinator.line(),
      scorer: options.prefixes,
      awaitingModel: (model) => options.loads?.room?.waitsFor(model) ?? false,
      events: {
        waiting: (task) => this.#observer.waiting(task),
        unplaceable: (task, decision) => {
          this.#observer.unplaceable(task, decision.code, decision.message);
          this.#fail(task, decision.code, decision.message, true);
        },
        assigned: (task, view, lease, reason) => this.#coordinator.assigned(task, view, lease, reason),
        moved: () => this.#queueMetrics.emit(this.#queue, this.#table.running(), true, this.#clock.now()),
      },
    });
    this.#admission = new TaskAdmission({
      ...{ registry, predictor: this.#predictor, clock: this.#clock, observer: this.#observer, table: this.#table },
      ...{ coordinator, ctxMax: this.#ctxMax, admissionCapacity: options.admissionCapacity, catalog: options.catalog },
      loads: options.loads,
      tracer: options.tracer,
      running: () => this.#state === 'running' && this.#admitting,
      evict: (victim, by) => {
        this.#observer.evicted(victim, by);
        this.#fail(
          victim,
          'QUEUE_FULL_DROP_LRU',
          'evicted from the full admission queue by a newer task (policy drop-lru)',
          true,
        );
      },
      pump: () => this.#scheduler.pump(),
    });
    this.#unsubscribe = registry.subscribe((e) => {
      if (e.type === 'offline' || e.type === 'deregistered') abandonNode(this.#table.running(), e);
      else if (e.type === 'heartbeat')
        abandonSilentDispatches(this.#table.running(), registry, e.nodeId, this.#clock.now());
      this.#scheduler.pump();
    });
    this.#tick = setInterval(() => this.#housekeeping(), tickMs);
    this.#tick.unref();
  }

  get state(): TaskServiceState {
    return this.#state;
  }

  get predictor(): Predictor {
    return this.#predictor;
  }

  /** Waiting tasks this replica admitted: its local queue and, with a shared store, those mid-claim. */
  queueDepth(): Record<'interactive' | 'batch', number> {
    const c = this.#coordinator.claiming();
    return {
      interactive: this.#queue.sizeOf('interactive') + (c?.interactive ?? 0),
      batch: this.#queue.sizeOf('batch') + (c?.batch ?? 0),
    };
  }

  /** Task life events (admitted, dispatched, first token, ended), never per token. Returns the unsubscribe function. */
  subscribe(listener: TaskEventListener): () => void {
    return this.#events.subscribe(listener);
  }

  /** Token frames relayed to clients since start (cumulative, read on demand: no per-token work; see task-load.ts). */
  tokensRelayed(): number {
    return tokensRelayed(this.#tokensEnded, this.#table.running());
  }

  /** Queue depth, capacity, running tasks and the predicted wait of a new interactive task of `expectedTokens`. */
  load(expectedTokens: number): TaskLoad {
    return taskLoad({
      queue: this.#queue,
      running: this.#table.running(),
      predictor: this.#predictor,
      registry: this.#registry,
      expectedTokens,
    });
  }

  /** A live task, or an ended one within its grace period. */
  get(id: string): TaskRecord | RetainedTask | undefined {
    return this.#table.get(id);
  }

  /** Admits a task (task-admission.ts); rejects with its typed refusals. */
  admit(named: TaskRequest, source: AdmissionSource): Promise<Admitted> {
    return this.#admission.admit(named, source);
  }

  /** Cancels a task (client request or disconnect). The terminal frame is `end {canceled: true}`. */
  cancel(id: string, reason: CancelReason): CancelResult {
    const task = this.#table.live(id);
    if (task === undefined) return this.#table.isEndedWithinGrace(id) ? 'already-ended' : 'unknown';
    if (task.state === 'ended') return 'already-ended';
    this.#queue.remove(id);
    const end = canceledEnd(task, this.#clock.now());
    this.#observer.canceled(task, reason);
    this.#end(task, { frame: { event: 'end', data: end } });
    return 'canceled';
  }

  /**
   * The latest deadline (ms since the epoch) of the model's tasks queued here, or undefined when none
   * is. Reads every live task: for rare decisions (an eviction, a swap), never per task.
   */
  latestQueuedDeadline(modelRef: string): number | undefined {
    let latest: number | undefined;
    for (const task of this.#table.liveTasks())
      if (task.state === 'queued' && task.request.model_ref === modelRef)
        latest = Math.max(latest ?? 0, task.deadlineAt);
    return latest;
  }

  /**
   * Ends the queued tasks of a model whose load failed (spec 67: a failed load stays failed until
   * it is unloaded, so nothing would ever serve them) with MODEL_LOAD_FAILED and why. `names` are
   * the names the failed pool listed; a queued task carries the model's ref. Returns how many ended.
   */
  failLoadWaiters(names: ReadonlySet<string>, message: string): number {
    let ended = 0;
    for (const task of this.#table.liveTasks()) {
      if (task.state !== 'queued' || !names.has(task.request.model_ref)) continue;
      this.#queue.remove(task.id);
      this.#observer.unplaceable(task, 'MODEL_LOAD_FAILED', message);
      this.#fail(task, 'MODEL_LOAD_FAILED', message, false);
      ended += 1;
    }
    return ended;
  }

  /** Places queued tasks on free slots (see {@link Scheduler.pump}). Safe to call any time. */
  pump(): void {
    this.#scheduler.pump();
  }

  /** Refuses new tasks from now on (retriable INTERNAL, as while closing); the admitted ones run on. */
  stopAdmission(): void {
    this.#admitting = false;
  }

  /** True once no task admitted here is unfinished, false when `timeoutMs` passes first; dispatch goes on (spec 60). */
  drained(timeoutMs: number): Promise<boolean> {
    return this.#table.untilDrained(timeoutMs);
  }

  /** Stops admission and dispatch, ends every unfinished task `error INTERNAL` (retriable), aborts upstream requests, waits (≤ `closeTimeoutMs`). Idempotent. */
  close(): Promise<void> {
    this.#closing ??= this.#close();
    return this.#closing;
  }

  async #close(): Promise<void> {
    this.#state = 'closing';
    this.#scheduler.close();
    clearInterval(this.#tick);
    this.#unsubscribe();
    for (const task of this.#table.liveTasks()) {
      if (task.state === 'ended') continue;
      this.#queue.remove(task.id);
      this.#fail(task, 'INTERNAL', 'orchestratord is shutting down; resubmit the task', true);
    }
    await this.#inflight.idle(this.#closeTimeoutMs);
    await this.#coordinator.close();
    this.#table.clearEnded();
    this.#events.clear();
    this.#state = 'closed';
  }

  /** Starts the task's dispatch to `view`, whose slot the scheduler leased for it (`held`: a cluster slot lease the coordinator's claim took). */
  #placed(task: TaskRecord, view: PoolView, lease: Lease, reason: PlacementReason, held?: string): void {
    if (this.#prefixes !== undefined) task.ticket.prefix = this.#prefixes.placed(task.ticket.blocks, view);
    this.#observer.placed(task, view, reason, this.#clock.now());
    this.#run(task, view, lease, false, held);
  }

  /** A task of a replica that died: queued here, or re-attached to its running dispatch (shared/adoption.ts). */
  #adopt(a: Adoption): void {
    if (this.#state !== 'running' || this.#table.get(a.id) !== undefined) return;
    const task = adoptedTask(a, this.#metricsIntervalMs, this.#clock.now(), this.#tracer);
    this.#table.add(task);
    this.#observer.adopted(task);
    const fail = (code: ErrorCode, message: string): void => this.#fail(task, code, message, true);
    adoptInto(task, a.placement, {
      queue: this.#queue,
      registry: this.#registry,
      fail,
      resume: (view, lease) => this.#run(task, view, lease, true),
    });
  }

  /** Runs an attempt of the task on `view`: a new dispatch, or (`resume`) a re-attach to the one running there. */
  #run(task: TaskRecord, view: PoolView, lease: Lease, resume: boolean, held?: string): void {
    task.life.run();
    task.lease = lease;
    task.controller = new AttemptAbort();
    task.placement = placementOf(view);
    task.dispatchedAt = this.#clock.now();
    task.quiet = undefined;
    this.#table.startedRunning(task);
    this.#inflight.started();
    // One callback pair for the attempt's whole life, no async function suspended on it (performance
    // notes: attempts settled by one callback).
    this.#startAttempt(task, view, task.controller, resume, held).then(
      (outcome) => this.#attemptEnded(task, view, lease, outcome),
      (err: unknown) => this.#attemptEnded(task, view, lease, undefined, err),
    );
  }

  /** The attempt's outcome, under the slot lease the coordinator needs (`held`: the one its claim took). */
  #startAttempt(
    task: TaskRecord,
    view: PoolView,
    controller: AttemptAbort,
    resume: boolean,
    held: string | undefined,
  ): Promise<AttemptOutcome> {
    const run = (): Promise<AttemptOutcome> => this.#runAttempt(task, view, controller, resume);
    return this.#coordinator.attempt(task, view, resume, held, run);
  }

  /**
   * The attempt's outcome; a throw while starting it (a bug) becomes its rejection. A resumed
   * attempt never re-places: restarting the generation would repeat what the client already has.
   */
  #runAttempt(task: TaskRecord, view: PoolView, controller: AttemptAbort, resume: boolean): Promise<AttemptOutcome> {
    try {
      const input = {
        client: resume ? reattaching(this.#poolClient, task.id) : this.#poolClient,
        target: view.dispatch,
        poolId: view.pool_id,
        body: dispatchRequest(task, this.#clock.now(), this.#coordinator.reattachMs),
        controller,
        correlationId: task.correlationId,
        trace: task.trace?.attempt(view.node_id, view.pool_id, view.address, resume),
        failedAttempts: resume ? this.#maxRetries : task.failedAttempts,
        maxRetries: this.#maxRetries,
      };
      if (task.delivery === 'answer')
        return runAnswerAttempt({ ...input, sink: answerSink(task, view, this.#clock, this.#observer) });
      return runAttempt({ ...input, sink: tokenSink(task, view, this.#clock, this.#observer) });
    } catch (err) {
      return Promise.reject(err);
    }
  }

  /**
   * An attempt is over: `outcome` is what its failure policy decided, or `crash` what it threw (a bug:
   * the task fails INTERNAL). The task leaves the running set; its slot is released after the outcome
   * is handled, so a re-queued task is back in line before the freed slot triggers the next pump
   * (not for a `/v2` stream with a Redis store that did not end: the store is asked first, shared/handoff.ts).
   */
  #attemptEnded(
    task: TaskRecord,
    view: PoolView,
    lease: Lease,
    outcome: AttemptOutcome | undefined,
    crash?: unknown,
  ): void {
    this.#table.stoppedRunning(task);
    task.controller = undefined;
    try {
      if (outcome === undefined) this.#crashed(task, crash);
      else this.#coordinator.settle(task, outcome, () => this.#settle(task, view, outcome));
    } catch (err) {
      this.#crashed(task, err);
    } finally {
      lease.release();
      if (task.lease === lease) task.lease = undefined;
      this.#inflight.ended();
    }
  }

  #crashed(task: TaskRecord, err: unknown): void {
    this.#observer.crashed(task, err);
    this.#fail(task, 'INTERNAL', 'internal error while relaying the task', false);
  }

  /** Applies what the attempt's failure policy decided. */
  #settle(task: TaskRecord, view: PoolView, outcome: AttemptOutcome): void {
    if (outcome.kind === 'aborted' || task.state === 'ended') return;
    if (outcome.kind === 'end') {
      this.#observer.finished(task, view, outcome.event);
      const ev = outcome.event;
      this.#prefixes?.answered(
        task.ticket.blocks,
        task.ticket.prefix,
        view.pool_id,
        ev.prompt_tokens,
        ev.cached_tokens,
      );
      this.#end(task, { frame: { event: 'end', data: endOf(outcome.event) } });
      return;
    }
    applyPenalty(this.#registry, task, view, outcome.penalty);
    if (outcome.kind === 'fail') {
      if (outcome.attempts !== undefined) this.#observer.gaveUp(task, outcome.cause ?? outcome.code, outcome.attempts);
      else this.#observer.failedOn(task, view, outcome.code, outcome.message);
      this.#fail(task, outcome.code, outcome.message, outcome.retriable);
      return;
    }
    // retry: nothing was relayed yet, so the client cannot tell the difference.
    this.#observer.requeued(task, view, outcome.code, outcome.message, outcome.penalty);
    task.life.requeue();
    task.placement = undefined;
    this.#coordinator.requeue(task);
  }

  #requeued(task: TaskRecord): void {
    this.#queue.requeueFront(task.id, task.request.priority, task, task.deadlineAt);
    this.#scheduler.pump();
  }

  #fail(task: TaskRecord, code: ErrorCode, message: string, retriable: boolean): void {
    this.#end(task, { frame: { event: 'error', data: { code, message, retriable, engine: ENGINE } } });
  }

  /**
   * The one place a task ends (its lifecycle ends once: a second ending is ignored). With its
   * terminal `frame`: recorded, then delivered, upstream aborted, the frames kept for the grace
   * period. `movedTo`: another replica took it over and carries it on (a stall here): no frame, it
   * leaves the table, its readers reconnect with `Last-Event-ID` and any replica passes them there.
   */
  #end(task: TaskRecord, ending: { frame: SseFrame } | { movedTo: string }): void {
    if ('movedTo' in ending) return this.#moved(task, ending.movedTo);
    const queued = task.state === 'queued';
    if (!task.life.end('frame')) return;
    const { frame } = ending;
    // A turn that ran (ended normally or cancelled) left its prompt in that pool's KV cache.
    const served = frame.event === 'end' ? task.placement : undefined;
    // Observed first: the task's record is written before the store hears of the end, so a client
    // that reads the record after its terminal frame finds it ended.
    this.#observer.ended(task, frame, this.#clock.now());
    // The coordinator records the end (session turn, shared record), then the clients get the frame.
    this.#coordinator.ended(task, frame, served, queued, () => task.stream.append(frame));
    if (task.controller !== undefined) {
      // the attempt is still running: stop it, and a dispatch the node holds for a re-attach too
      task.controller.abort();
      this.#coordinator.abortHeld(task);
    }
    this.#tokensEnded += task.tokens;
    this.#table.retire(task, this.#clock.now());
  }

  #moved(task: TaskRecord, to: string): void {
    if (!task.life.end('moved')) return;
    task.trace?.movedAway(to);
    this.#coordinator.movedAway(task);
    this.#table.forget(task);
    task.stream.moved();
    this.#tokensEnded += task.tokens;
    task.log.warn(
      {
        task_id: task.id,
        owner: to,
        human: `Task ${task.id} was taken over by replica ${to} while this replica's lease on it had lapsed (a stall): its readers reconnect there`,
      },
      'task handed off',
    );
  }

  #housekeeping(): void {
    if (this.#state !== 'running') return;
    const now = this.#clock.now();
    this.#table.expire(now);
    for (const entry of this.#queue.takeExpired(now)) {
      const task = entry.item;
      this.#observer.expiredInQueue(task, now);
      this.#fail(
        task,
        'DEADLINE_UNMET',
        `deadline of ${task.request.deadline_ms} ms passed while the task was queued`,
        false,
      );
    }
    for (const task of [...this.#table.running()]) {
      if (task.deadlineAt > now) continue;
      this.#observer.timedOut(task);
      this.#fail(
        task,
        'DECODE_TIMEOUT',
        `deadline of ${task.request.deadline_ms} ms passed while the task was running`,
        true,
      );
    }
    this.#queueMetrics.emit(this.#queue, this.#table.running(), false, now);
    this.#coordinator.tick(now);
    this.#scheduler.pump();
  }
}
