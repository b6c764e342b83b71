import type { EndEvent, ErrorCode, SseFrame, TaskRequest } from '@llama-orch/contracts';
import { checkAdmission } from '../admission/admission-checks.js';
import { AdmissionQueue } from '../admission/admission-queue.js';
import { preparationSteps } from '../admission/model-availability.js';
import { Predictor } from '../admission/predictor.js';
import { InternalError, InvalidParamsError, QueueFullError } from '../errors.js';
import type { ClusterSlotLeases } from '../registry/cluster-slot-leases.js';
import type { NodeRegistry } from '../registry/node-registry.js';
import type { Lease, PoolView } from '../registry/pool-view.js';
import { Scheduler } from '../scheduling/scheduler.js';
import type { SessionStore } from '../sessions/session-store.js';
import type { Clock, Log } from '@llama-orch/daemon-support';
import { AttemptAbort } from '../upstream/attempt-abort.js';
import { runAnswerAttempt } from '../upstream/answer-attempt.js';
import { runAttempt, type AttemptOutcome } from '../upstream/dispatch-attempt.js';
import type { PoolClient } from '../upstream/pool-client.js';
import { withClusterLease } from './cluster-lease-attempt.js';
import { InFlight } from './in-flight.js';
import { abandonNode, applyPenalty } from './node-faults.js';
import { QueueMetrics } from './queue-metrics.js';
import { TaskEvents, type TaskEventListener } from './task-events.js';
import { taskLoad, tokensRelayed, type TaskLoad } from './task-load.js';
import { TaskObserver, type CancelReason } from './task-observer.js';
import { answerSink } from './answer-sink.js';
import { canceledEnd, dispatchRequest, newTaskRecord, type Delivery, type RetainedTask, type TaskRecord } from './task-record.js';
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

export type { TaskServiceOptions, AdmissionResult, Admitted, CancelResult, CancelReason, TaskLoad, TaskServiceState } from './task-service-types.js';

const ENGINE = 'llamacpp';

export class TaskService {
  readonly #registry: NodeRegistry;
  readonly #clusterLeases: ClusterSlotLeases | undefined;
  readonly #poolClient: PoolClient;
  readonly #sessions: SessionStore;
  readonly #clock: Clock;
  readonly #ctxMax: number;
  readonly #maxRetries: number;
  readonly #closeTimeoutMs: number;
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
  #closing: Promise<void> | undefined;
  /** Token frames relayed by tasks that have ended (see {@link tokensRelayed}). */
  #tokensEnded = 0;

  constructor(options: TaskServiceOptions) {
    const { registry, metrics, tickMs = 100, metricsIntervalMs = 1000 } = options;
    this.#registry = registry;
    this.#clusterLeases = options.clusterLeases;
    this.#poolClient = options.poolClient;
    this.#sessions = options.sessions;
    this.#clock = options.clock;
    this.#ctxMax = options.ctxMax;
    this.#maxRetries = options.maxRetries ?? 1;
    this.#closeTimeoutMs = options.closeTimeoutMs ?? 2000;
    this.#observer = new TaskObserver(metrics, this.#predictor, this.#events);
    this.#table = new TaskTable({ graceMs: options.streamGraceMs, maxEnded: options.streamGraceMaxTasks ?? 100_000 });
    this.#queue = new AdmissionQueue<TaskRecord>({
      capacity: options.admissionCapacity,
      policy: options.admissionPolicy,
      groupOf: (t) => t.request.model_ref,
    });
    this.#queueMetrics = new QueueMetrics({ registry, predictor: this.#predictor, intervalMs: metricsIntervalMs });
    this.#scheduler = new Scheduler<TaskRecord>({
      registry,
      strategy: options.placementStrategy,
      line: this.#queue,
      events: {
        waiting: (task) => this.#observer.waiting(task),
        unplaceable: (task, decision) => {
          this.#observer.unplaceable(task, decision.code, decision.message);
          this.#fail(task, decision.code, decision.message, true);
        },
        assigned: (task, view, lease, reason) => {
          this.#observer.placed(task, view, reason, this.#clock.now());
          this.#dispatch(task, view, lease);
        },
        moved: () => this.#queueMetrics.emit(this.#queue, this.#table.running(), true, this.#clock.now()),
      },
    });
    this.#unsubscribe = registry.subscribe((e) => {
      if (e.type === 'offline' || e.type === 'deregistered') abandonNode(this.#table.running(), e);
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

  queueDepth(): Record<'interactive' | 'batch', number> {
    return { interactive: this.#queue.sizeOf('interactive'), batch: this.#queue.sizeOf('batch') };
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
    return taskLoad({ queue: this.#queue, running: this.#table.running(), predictor: this.#predictor, registry: this.#registry, expectedTokens });
  }

  /** A live task, or an ended one within its grace period. */
  get(id: string): TaskRecord | RetainedTask | undefined {
    return this.#table.get(id);
  }

  /**
   * Validates a task against the live cluster, enqueues it, writes its `started` frame and pumps
   * (a task with a free slot is dispatched before this returns). Throws typed errors
   * (INVALID_PARAMS, DEADLINE_UNMET, MODEL_NOT_AVAILABLE, ADMISSION_REJECT, QUEUE_FULL_DROP_LRU)
   * that the error handler maps to envelopes. `log` and `correlationId` are the admitting
   * request's: the task's log lines and its dispatches carry them; `clientKey` the name of the
   * key that sent it (its tokens are counted under that name); `delivery` how its output goes out.
   */
  admit(named: TaskRequest, log: Log, correlationId: string, clientKey?: string, delivery?: Delivery): Admitted {
    if (this.#state !== 'running') throw new InternalError('orchestratord is shutting down', { retriable: true, retryAfterMs: 1000 });
    // An alias becomes the model ref the pools list: one queue group, one wait key per model.
    const modelRef = this.#registry.canonicalModel(named.model_ref);
    const request = modelRef === named.model_ref ? named : { ...named, model_ref: modelRef };
    if (this.#table.has(request.task_id)) throw new InvalidParamsError(`task_id: task ${request.task_id} already exists`);
    const { availability: avail, prediction } = checkAdmission({
      request,
      views: this.#registry.poolsForModel(request.model_ref),
      predictor: this.#predictor,
      ahead: this.#queue.countAhead(request.model_ref, request.priority),
      ctxMax: this.#ctxMax,
      budgetRemaining: this.#sessions.budgetRemaining(request.session_id),
      retryAfterMs: this.#registry.heartbeatIntervalMs,
      onReject: (code) => this.#observer.refused(code),
    });
    const task = newTaskRecord({
      request,
      modelName: named.model_ref,
      affinity: this.#sessions.lastPool(request.session_id),
      log,
      correlationId,
      clientKey,
      now: this.#clock.now(),
      predictedStartMs: prediction.startMs,
      phase: avail.ready.length > 0 ? 'queued' : 'preparing',
      delivery,
    });
    const result = this.#queue.enqueue(task.id, request.priority, task, task.deadlineAt);
    if (result.kind === 'full') {
      this.#observer.queueFull(log, task.id, result.policy, this.#queue.size, this.#queue.capacity);
      throw new QueueFullError(
        result.policy === 'reject' ? 'ADMISSION_REJECT' : 'QUEUE_FULL_DROP_LRU',
        `admission queue is full (${this.#queue.capacity} tasks, policy ${result.policy})`,
        {
          policyLabel: result.policy,
          retryAfterMs: Math.max(1000, prediction.serviceMs ?? 1000),
        },
      );
    }
    this.#table.add(task);
    this.#sessions.taskStarted(request.session_id);
    task.lastPosition = result.position;
    task.stream.append({ event: 'started', data: { queue_position: result.position, predicted_start_ms: prediction.startMs } });
    this.#observer.admitted(task, result.position);
    if (result.evicted !== undefined) {
      const victim = result.evicted.item;
      this.#observer.evicted(victim, task);
      this.#fail(victim, 'QUEUE_FULL_DROP_LRU', 'evicted from the full admission queue by a newer task (policy drop-lru)', true);
    }
    const steps = avail.ready.length > 0 ? [] : preparationSteps(avail.provisioning);
    this.#scheduler.pump();
    return {
      task_id: task.id,
      queue_position: result.position,
      predicted_start_ms: prediction.startMs,
      backoff_ms: 0,
      preparation: { steps },
      dispatched: task.state === 'running',
    };
  }

  /** Cancels a task (client request or disconnect). The terminal frame is `end {canceled: true}`. */
  cancel(id: string, reason: CancelReason): CancelResult {
    const task = this.#table.live(id);
    if (task === undefined) return this.#table.isEndedWithinGrace(id) ? 'already-ended' : 'unknown';
    if (task.state === 'ended') return 'already-ended';
    if (task.state === 'queued') this.#queue.remove(id);
    const end = canceledEnd(task, this.#clock.now());
    this.#observer.canceled(task, reason);
    this.#end(task, { event: 'end', data: end });
    return 'canceled';
  }

  /** Places queued tasks on free slots (see {@link Scheduler.pump}). Safe to call any time. */
  pump(): void {
    this.#scheduler.pump();
  }

  /**
   * Stops admission and dispatch, ends every unfinished task with an `error` frame (INTERNAL,
   * retriable), aborts upstream requests and waits (at most `closeTimeoutMs`) for them to unwind.
   * Idempotent.
   */
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
      if (task.state === 'queued') this.#queue.remove(task.id);
      this.#fail(task, 'INTERNAL', 'orchestratord is shutting down; resubmit the task', true);
    }
    await this.#inflight.idle(this.#closeTimeoutMs);
    this.#table.clearEnded();
    this.#events.clear();
    this.#state = 'closed';
  }

  /** Starts the task's dispatch to `view`, whose slot the scheduler leased for it. */
  #dispatch(task: TaskRecord, view: PoolView, lease: Lease): void {
    task.state = 'running';
    task.phase = 'dispatching';
    task.lease = lease;
    task.controller = new AttemptAbort();
    task.placement = { node_id: view.node_id, pool_id: view.pool_id, engine_version: view.snapshot.engine_version, address: view.address };
    task.dispatchedAt = this.#clock.now();
    this.#table.startedRunning(task);
    this.#inflight.started();
    // One callback pair for the attempt's whole life, no async function suspended on it (performance
    // notes: attempts settled by one callback).
    this.#startAttempt(task, view, task.controller).then(
      (outcome) => this.#attemptEnded(task, view, lease, outcome),
      (err: unknown) => this.#attemptEnded(task, view, lease, undefined, err),
    );
  }

  /** The attempt's outcome; with a shared store, under a cluster slot lease. */
  #startAttempt(task: TaskRecord, view: PoolView, controller: AttemptAbort): Promise<AttemptOutcome> {
    const leases = this.#clusterLeases;
    return leases === undefined ? this.#runAttempt(task, view, controller) : withClusterLease(leases, view, task.id, () => this.#runAttempt(task, view, controller));
  }

  /** The attempt's outcome; a throw while starting it (a bug) becomes its rejection. */
  #runAttempt(task: TaskRecord, view: PoolView, controller: AttemptAbort): Promise<AttemptOutcome> {
    try {
      const input = {
        client: this.#poolClient,
        target: view.dispatch,
        poolId: view.pool_id,
        body: dispatchRequest(task, this.#clock.now()),
        controller,
        correlationId: task.correlationId,
        failedAttempts: task.failedAttempts,
        maxRetries: this.#maxRetries,
      };
      if (task.delivery === 'answer') return runAnswerAttempt({ ...input, sink: answerSink(task, view, this.#clock, this.#observer) });
      return runAttempt({ ...input, sink: tokenSink(task, view, this.#clock, this.#observer) });
    } catch (err) {
      return Promise.reject(err);
    }
  }

  /**
   * An attempt is over: `outcome` is what its failure policy decided, or `crash` what it threw (a
   * bug: the task fails INTERNAL). Either way the task leaves the running set, and its slot is
   * released after the outcome is handled, so a re-queued task is back in line before the freed
   * slot triggers the next pump.
   */
  #attemptEnded(task: TaskRecord, view: PoolView, lease: Lease, outcome: AttemptOutcome | undefined, crash?: unknown): void {
    this.#table.stoppedRunning(task);
    try {
      if (outcome === undefined) this.#crashed(task, crash);
      else this.#settle(task, view, outcome);
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
      const ev = outcome.event;
      this.#observer.finished(task, view, ev);
      const end: EndEvent = {
        tokens_out: ev.tokens_out,
        decode_ms: ev.decode_ms,
        decode_time_ms: ev.decode_ms,
        pool_id: ev.pool_id,
        node_id: ev.node_id,
        engine_version: ev.engine_version,
        stop_type: ev.stop_type,
      };
      // Only what the node reported: a node that does not count prompt tokens leaves them out.
      if (ev.prompt_tokens !== undefined) end.prompt_tokens = ev.prompt_tokens;
      if (ev.cached_tokens !== undefined) end.cached_tokens = ev.cached_tokens;
      if (ev.finish_reason !== undefined) end.finish_reason = ev.finish_reason;
      this.#end(task, { event: 'end', data: end });
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
    task.state = 'queued';
    task.phase = 'queued';
    task.controller = undefined;
    task.placement = undefined;
    this.#queue.requeueFront(task.id, task.request.priority, task, task.deadlineAt);
    this.#scheduler.pump();
  }

  #fail(task: TaskRecord, code: ErrorCode, message: string, retriable: boolean): void {
    this.#end(task, { event: 'error', data: { code, message, retriable, engine: ENGINE } });
  }

  /** The one place a task ends: writes the terminal frame, aborts upstream, keeps the frames for the grace period. */
  #end(task: TaskRecord, frame: SseFrame): void {
    if (task.state === 'ended') return;
    task.state = 'ended';
    task.stream.append(frame);
    task.controller?.abort();
    this.#tokensEnded += task.tokens;
    this.#observer.ended(task, frame, this.#clock.now());
    // A turn that ran (ended normally or cancelled) left its prompt in that pool's KV cache.
    const served = frame.event === 'end' ? task.placement : undefined;
    this.#sessions.taskEnded(task.request.session_id, frame.event === 'end' ? frame.data.tokens_out : undefined, served);
    this.#table.retire(task, this.#clock.now());
  }

  #housekeeping(): void {
    if (this.#state !== 'running') return;
    const now = this.#clock.now();
    this.#table.expire(now);
    for (const entry of this.#queue.takeExpired(now)) {
      const task = entry.item;
      this.#observer.expiredInQueue(task, now);
      this.#fail(task, 'DEADLINE_UNMET', `deadline of ${task.request.deadline_ms} ms passed while the task was queued`, false);
    }
    for (const task of [...this.#table.running()]) {
      if (task.deadlineAt > now) continue;
      this.#observer.timedOut(task);
      this.#fail(task, 'DECODE_TIMEOUT', `deadline of ${task.request.deadline_ms} ms passed while the task was running`, true);
    }
    this.#queueMetrics.emit(this.#queue, this.#table.running(), false, now);
    this.#scheduler.pump();
  }
}
