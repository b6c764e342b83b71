import type {
  AdmissionResponse, DispatchRequest, EndEvent, ErrorCode, SseFrame, TaskRequest,
} from '@llama-orch/contracts';
import type { Log } from './log.js';
import { AdmissionQueue, type QueuePolicy } from './admission-queue.js';
import type { Clock } from './clock.js';
import { checkAdmission } from './admission-checks.js';
import { InternalError, InvalidParamsError, QueueFullError } from './errors.js';
import type { OrchdMetrics } from './metrics.js';
import { preparationSteps } from './model-availability.js';
import type { NodeRegistry, PoolView, RegistryEvent } from './node-registry.js';
import {
  candidateKey, place, type PlacementRequest, type PlacementStrategy, type RoundRobinCursor,
} from './placement.js';
import type { PoolClient } from './pool-client.js';
import { Predictor } from './predictor.js';
import type { SessionStore } from './session-store.js';
import { canceledEnd, newTaskRecord, type RetainedTask, type TaskRecord } from './task.js';
import { runAttempt, type AttemptOutcome } from './task-runner.js';
import { metricsFrame } from './task-telemetry.js';

/**
 * The data plane: admission, the queue, placement, dispatch and the relay into each task's frame
 * log. Invariants:
 * - every admitted task ends with exactly one terminal frame (`end` or `error`), whatever happens
 *   (node loss, cancel, disconnect, deadline, eviction, shutdown): all endings go through `#end`;
 * - slots are leased synchronously inside `pump()`, so two tasks never get one slot;
 * - a task is re-placed at most `maxRetries` times, and only before its first token.
 */

export interface TaskDispatcherOptions {
  registry: NodeRegistry;
  poolClient: PoolClient;
  metrics: OrchdMetrics;
  sessions: SessionStore;
  clock: Clock;
  logger: Log;
  admissionCapacity: number;
  admissionPolicy: QueuePolicy;
  placementStrategy: PlacementStrategy;
  /** Largest ctx accepted when no pool reports one. */
  ctxMax: number;
  /** How long an ended task's frames stay readable, ms. */
  streamGraceMs: number;
  /** Most ended tasks kept readable; the oldest go first past it. @default 100000 */
  streamGraceMaxTasks?: number;
  /** Housekeeping period (deadlines, metrics frames), ms. @default 100 */
  tickMs?: number;
  /** Period of `metrics` frames while a task waits, ms. @default 1000 */
  metricsIntervalMs?: number;
  /** Re-placements after a node failure before the first token. @default 1 */
  maxRetries?: number;
  /** How long close() waits for in-flight upstream requests to unwind, ms. @default 2000 */
  closeTimeoutMs?: number;
}

/** AdmissionResponse without the stream URLs (the route knows the public address). */
export type AdmissionResult = Omit<AdmissionResponse, 'streams'>;

/** What `admit` decided: the 202's fields, and whether the task went to a node at once. */
export interface Admitted extends AdmissionResult {
  readonly dispatched: boolean;
}

export type CancelResult = 'canceled' | 'already-ended' | 'unknown';
export type CancelReason = 'client' | 'disconnect';
export type DispatcherState = 'running' | 'closing' | 'closed';

const ENGINE = 'llamacpp';

function placementRequest(task: TaskRecord): PlacementRequest {
  const r = task.request;
  return { model_ref: r.model_ref, ctx: r.ctx, determinism: r.determinism, placement: r.placement, exclude: task.exclude };
}

/** Tasks with equal keys get equal placement decisions, so one that must wait means all wait. */
function waitKey(task: TaskRecord): string {
  // Cached on the task (pump asks for every queued task on every pass); cleared when `exclude` grows.
  if (task.waitKey !== undefined) return task.waitKey;
  const r = task.request;
  task.waitKey = JSON.stringify([r.model_ref, r.ctx, r.determinism ?? '', r.placement ?? null, [...task.exclude].sort()]);
  return task.waitKey;
}

/** Abort reason of attempts whose node was lost; distinguishes them from cancels and deadlines. */
class NodeLostSignal extends Error {
  override readonly name = 'NodeLostSignal';
}

export class TaskDispatcher {
  readonly #o: Required<TaskDispatcherOptions>;
  readonly #queue: AdmissionQueue<TaskRecord>;
  readonly #tasks = new Map<string, TaskRecord>();
  readonly #running = new Set<TaskRecord>();
  readonly #inflight = new Set<Promise<void>>();
  /** Ended tasks still readable (`stream_grace_ms`), and when each expires, in order (the grace is constant). */
  readonly #ended = new Map<string, RetainedTask>();
  readonly #expiries: Array<{ readonly at: number; readonly id: string }> = [];
  #expiryHead = 0;
  readonly #rr: RoundRobinCursor = { next: 0 };
  readonly #predictor = new Predictor();
  readonly #tick: NodeJS.Timeout;
  readonly #unsubscribe: () => void;
  #state: DispatcherState = 'running';
  #pumping = false;
  #pumpAgain = false;
  #closing: Promise<void> | undefined;

  constructor(options: TaskDispatcherOptions) {
    this.#o = { tickMs: 100, metricsIntervalMs: 1000, maxRetries: 1, closeTimeoutMs: 2000, streamGraceMaxTasks: 100_000, ...options };
    this.#queue = new AdmissionQueue<TaskRecord>({
      capacity: options.admissionCapacity, policy: options.admissionPolicy, groupOf: (t) => t.request.model_ref,
    });
    this.#unsubscribe = options.registry.subscribe((e) => {
      if (e.type === 'offline' || e.type === 'deregistered') this.#abandonNode(e);
      this.pump();
    });
    this.#tick = setInterval(() => this.#housekeeping(), this.#o.tickMs);
    this.#tick.unref();
  }

  get state(): DispatcherState {
    return this.#state;
  }

  get predictor(): Predictor {
    return this.#predictor;
  }

  queueDepth(): Record<'interactive' | 'batch', number> {
    return { interactive: this.#queue.sizeOf('interactive'), batch: this.#queue.sizeOf('batch') };
  }

  /** A live task, or an ended one within its grace period. */
  get(id: string): TaskRecord | RetainedTask | undefined {
    return this.#tasks.get(id) ?? this.#ended.get(id);
  }

  /**
   * Validates a task against the live cluster, enqueues it and writes its `started` frame.
   * Throws typed errors (INVALID_PARAMS, DEADLINE_UNMET, MODEL_NOT_AVAILABLE, ADMISSION_REJECT,
   * QUEUE_FULL_DROP_LRU) that the error handler maps to envelopes.
   */
  admit(request: TaskRequest, log: Log): Admitted {
    if (this.#state !== 'running') throw new InternalError('orchestratord is shutting down', { retriable: true, retryAfterMs: 1000 });
    if (this.#tasks.has(request.task_id) || this.#ended.has(request.task_id)) {
      throw new InvalidParamsError(`task_id: task ${request.task_id} already exists`);
    }
    const ahead = this.#queue.countAhead(request.model_ref, request.priority);
    const { availability: avail, prediction } = checkAdmission({
      request,
      views: this.#o.registry.poolsForModel(request.model_ref),
      predictor: this.#predictor,
      ahead,
      ctxMax: this.#o.ctxMax,
      budgetRemaining: this.#o.sessions.budgetRemaining(request.session_id),
      retryAfterMs: this.#o.registry.heartbeatIntervalMs,
      onReject: (code) => this.#o.metrics.tasksRejected.inc({ engine: ENGINE, reason: code }),
    });
    const now = this.#o.clock.now();
    const task = newTaskRecord({
      request, log, now, predictedStartMs: prediction.startMs, phase: avail.ready.length > 0 ? 'queued' : 'preparing',
    });
    const result = this.#queue.enqueue(task.id, request.priority, task, task.deadlineAt);
    if (result.kind === 'full') {
      const code = result.policy === 'reject' ? 'ADMISSION_REJECT' : 'QUEUE_FULL_DROP_LRU';
      this.#o.metrics.backpressureEvents.inc({ engine: ENGINE, policy: result.policy });
      this.#o.metrics.tasksRejected.inc({ engine: ENGINE, reason: code });
      const retryAfterMs = Math.max(1000, prediction.serviceMs ?? 1000);
      log.warn({ task_id: task.id, policy: result.policy, queue_depth: this.#queue.size, human: `Refused task ${task.id}: admission queue full (${this.#queue.size}/${this.#queue.capacity}, policy ${result.policy})` }, 'admission rejected');
      throw new QueueFullError(code, `admission queue is full (${this.#queue.capacity} tasks, policy ${result.policy})`, {
        policyLabel: result.policy, retryAfterMs,
      });
    }
    this.#tasks.set(task.id, task);
    this.#o.sessions.taskStarted(request.session_id);
    this.#o.metrics.tasksEnqueued.inc({ engine: ENGINE, priority: request.priority });
    task.lastPosition = result.position;
    task.stream.append({ event: 'started', data: { queue_position: result.position, predicted_start_ms: prediction.startMs } });
    task.log.info({
      queue_position: result.position, predicted_start_ms: prediction.startMs, model_ref: request.model_ref, priority: request.priority,
      human: `Accepted task ${task.id} for '${request.model_ref}'; queued at position ${result.position} (ETA ${prediction.startMs} ms)`,
    }, 'task admitted');
    if (result.evicted !== undefined) {
      const victim = result.evicted.item;
      this.#o.metrics.backpressureEvents.inc({ engine: ENGINE, policy: 'drop-lru' });
      this.#o.metrics.tasksRejected.inc({ engine: ENGINE, reason: 'QUEUE_FULL_DROP_LRU' });
      victim.log.warn({ evicted_by: task.id, human: `Evicted queued batch task ${victim.id} to admit ${task.id} (queue full, drop-lru)` }, 'task evicted');
      this.#fail(victim, 'QUEUE_FULL_DROP_LRU', 'evicted from the full admission queue by a newer task (policy drop-lru)', true);
    }
    const steps = avail.ready.length > 0 ? [] : preparationSteps(avail.provisioning);
    this.pump();
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
    const task = this.#tasks.get(id);
    if (task === undefined) return this.#ended.has(id) ? 'already-ended' : 'unknown';
    if (task.state === 'ended') return 'already-ended';
    if (task.state === 'queued') this.#queue.remove(id);
    const end = canceledEnd(task, this.#o.clock.now());
    this.#o.metrics.tasksCanceled.inc({ engine: ENGINE, pool_id: task.placement?.pool_id ?? '', reason });
    task.log.info({ reason, tokens_out: task.tokens, human: `Task ${id} canceled (${reason === 'client' ? 'client request' : 'client disconnected'}) after ${task.tokens} token(s)` }, 'task canceled');
    this.#end(task, { event: 'end', data: end });
    return 'canceled';
  }

  /** Places queued tasks on free slots. Synchronous, so leases never race. Safe to call any time. */
  pump(): void {
    if (this.#state !== 'running' || this.#queue.size === 0) return;
    if (this.#pumping) {
      this.#pumpAgain = true;
      return;
    }
    this.#pumping = true;
    let moved = false;
    try {
      do {
        this.#pumpAgain = false;
        const waiting = new Set<string>();
        for (const entry of this.#queue) {
          const task = entry.item;
          const key = waitKey(task);
          if (waiting.has(key)) continue;
          // The registry's per-model index: only the model's pools are looked at, and a lease taken
          // by #start below is in the views the next decision reads.
          const decision = place(placementRequest(task), this.#o.registry, this.#o.placementStrategy, this.#rr);
          if (decision.kind === 'wait') {
            waiting.add(key);
            if (!task.waitCounted) {
              task.waitCounted = true;
              this.#o.metrics.placementDecisions.inc({ outcome: 'no_capacity', pinned: String(task.request.placement?.mode === 'pin'), fallback: 'false' });
            }
            continue;
          }
          this.#queue.remove(task.id);
          moved = true;
          if (decision.kind === 'reject') {
            task.log.warn({ code: decision.code, human: `Cannot place task ${task.id}: ${decision.message}` }, 'placement failed');
            this.#fail(task, decision.code, decision.message, true);
            continue;
          }
          const view = decision.candidate;
          this.#o.metrics.placementDecisions.inc({
            outcome: 'assigned', pinned: String(decision.reason === 'pinned'), fallback: String(decision.reason === 'fallback'),
          });
          this.#start(task, view, decision.reason);
        }
      } while (this.#pumpAgain && this.#state === 'running');
    } finally {
      this.#pumping = false;
    }
    if (moved) this.#emitQueueMetrics(true);
  }

  /**
   * Stops admission and dispatch, ends every unfinished task with an `error` frame (INTERNAL,
   * retriable), aborts upstream requests and waits (bounded) for them to unwind. Idempotent.
   */
  close(): Promise<void> {
    this.#closing ??= this.#close();
    return this.#closing;
  }

  async #close(): Promise<void> {
    this.#state = 'closing';
    clearInterval(this.#tick);
    this.#unsubscribe();
    for (const task of [...this.#tasks.values()]) {
      if (task.state === 'ended') continue;
      if (task.state === 'queued') this.#queue.remove(task.id);
      this.#fail(task, 'INTERNAL', 'orchestratord is shutting down; resubmit the task', true);
    }
    if (this.#inflight.size > 0) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        Promise.allSettled([...this.#inflight]),
        new Promise<void>((resolve) => {
          timer = setTimeout(resolve, this.#o.closeTimeoutMs);
          timer.unref();
        }),
      ]);
      clearTimeout(timer);
    }
    this.#ended.clear();
    this.#expiries.length = 0;
    this.#expiryHead = 0;
    this.#state = 'closed';
  }

  #start(task: TaskRecord, view: PoolView, reason: string): void {
    const now = this.#o.clock.now();
    task.state = 'running';
    task.phase = 'dispatching';
    task.lease = this.#o.registry.lease(view.node_id, view.pool_id);
    task.controller = new AbortController();
    task.placement = { node_id: view.node_id, pool_id: view.pool_id, engine_version: view.snapshot.engine_version, address: view.address };
    task.dispatchedAt = now;
    this.#running.add(task);
    task.log.info({
      pool_id: view.pool_id, node_id: view.node_id, reason, attempt: task.failedAttempts + 1, waited_ms: now - task.admittedAt,
      human: `Placed task ${task.id} on pool ${view.pool_id} of node ${view.node_id} (${reason}; ${view.free} free slot(s) before this one)`,
    }, 'task placed');
    const run = this.#run(task, view).catch((err: unknown) => {
      task.log.error({ err }, 'dispatch crashed');
      this.#fail(task, 'INTERNAL', 'internal error while relaying the task', false);
    });
    this.#inflight.add(run);
    void run.finally(() => this.#inflight.delete(run));
  }

  async #run(task: TaskRecord, view: PoolView): Promise<void> {
    const controller = task.controller as AbortController;
    const lease = task.lease;
    const r = task.request;
    const body: DispatchRequest = {
      task_id: r.task_id,
      prompt: r.prompt,
      max_tokens: r.max_tokens,
      greedy: r.determinism === 'strict',
      deadline_ms: Math.max(1, task.deadlineAt - this.#o.clock.now()),
    };
    if (r.seed !== undefined) body.seed = r.seed;
    let outcome: AttemptOutcome;
    try {
      outcome = await runAttempt({
        client: this.#o.poolClient,
        target: view.dispatch,
        poolId: view.pool_id,
        body,
        signal: controller.signal,
        hasTokens: () => task.tokens > 0,
        onStreamOpen: () => {
          if (task.startedCounted) return;
          task.startedCounted = true;
          this.#o.metrics.tasksStarted.inc({ engine: ENGINE, engine_version: view.snapshot.engine_version, pool_id: view.pool_id, priority: r.priority });
        },
        onToken: (text) => this.#relayToken(task, view, text),
      });
    } finally {
      this.#running.delete(task);
    }
    if (outcome.kind === 'aborted' && controller.signal.reason instanceof NodeLostSignal && task.state === 'running') {
      const message = controller.signal.reason.message;
      outcome = task.tokens > 0
        ? { kind: 'error', code: 'WORKER_RESET', message, retriable: true }
        : { kind: 'retry', code: 'WORKER_RESET', message, saturated: false, unreachable: true };
    }
    try {
      this.#settle(task, view, outcome);
    } finally {
      // Released after the outcome is handled, so a re-queued task is back in line before the
      // freed slot triggers the next pump.
      lease?.release();
      if (task.lease === lease) task.lease = undefined;
    }
  }

  /**
   * A node that stopped heartbeating (or left) may be frozen rather than dead: its sockets stay
   * open and a dispatch to it would hang until the task's deadline. Abort the attempts running
   * there; `#run` turns that into a re-placement (no token relayed yet) or WORKER_RESET.
   */
  #abandonNode(e: RegistryEvent): void {
    for (const task of this.#running) {
      if (task.placement?.node_id !== e.nodeId || task.state !== 'running') continue;
      task.controller?.abort(new NodeLostSignal(`node ${e.nodeId} went ${e.type === 'offline' ? 'offline (missed heartbeats)' : 'away (deregistered)'} while running the task`));
    }
  }

  #relayToken(task: TaskRecord, view: PoolView, text: string): boolean {
    if (task.state !== 'running') return false;
    const id = task.stream.append({ event: 'token', data: { t: text, i: task.tokens } });
    if (id === undefined) return false;
    task.tokens += 1;
    if (task.tokens === 1) {
      const now = this.#o.clock.now();
      task.firstTokenAt = now;
      task.phase = 'streaming';
      this.#o.metrics.latencyFirstToken.observe(
        { engine: ENGINE, engine_version: view.snapshot.engine_version, pool_id: view.pool_id, priority: task.request.priority },
        now - task.admittedAt,
      );
      this.#predictor.observeFirstToken(view.node_id, view.pool_id, now - (task.dispatchedAt ?? now));
      task.log.info({ pool_id: view.pool_id, node_id: view.node_id, first_token_ms: now - task.admittedAt, human: `Streaming task ${task.id} from pool ${view.pool_id}; first token after ${now - task.admittedAt} ms` }, 'stream started');
    }
    return true;
  }

  #settle(task: TaskRecord, view: PoolView, outcome: AttemptOutcome): void {
    if (outcome.kind === 'aborted' || task.state === 'ended') return;
    if (outcome.kind === 'end') {
      const ev = outcome.event;
      const end: EndEvent = {
        tokens_out: ev.tokens_out,
        decode_ms: ev.decode_ms,
        decode_time_ms: ev.decode_ms,
        pool_id: ev.pool_id,
        node_id: ev.node_id,
        engine_version: ev.engine_version,
        stop_type: ev.stop_type,
      };
      this.#predictor.observeEnd(view.node_id, view.pool_id, ev.tokens_out, ev.decode_ms);
      this.#o.metrics.latencyDecode.observe({ engine: ENGINE, engine_version: ev.engine_version, pool_id: ev.pool_id, priority: task.request.priority }, ev.decode_ms);
      task.log.info({
        pool_id: ev.pool_id, node_id: ev.node_id, tokens_out: ev.tokens_out, decode_ms: ev.decode_ms, stop_type: ev.stop_type,
        human: `Task ${task.id} finished on pool ${ev.pool_id}: ${ev.tokens_out} token(s) in ${Math.round(ev.decode_ms)} ms (${ev.stop_type})`,
      }, 'task ended');
      this.#end(task, { event: 'end', data: end });
      return;
    }
    if (outcome.kind === 'error') {
      task.log.warn({ code: outcome.code, pool_id: view.pool_id, node_id: view.node_id, tokens_out: task.tokens, human: `Task ${task.id} failed on pool ${view.pool_id} after ${task.tokens} token(s): ${outcome.message}` }, 'task failed');
      this.#fail(task, outcome.code, outcome.message, outcome.retriable);
      return;
    }
    // retry: nothing was relayed yet, so the client cannot tell the difference.
    if (outcome.saturated) {
      this.#o.registry.markSaturated(view.node_id, view.pool_id);
    } else {
      this.#o.registry.markSuspect(view.node_id, view.pool_id, outcome.unreachable);
      task.failedAttempts += 1;
      task.exclude.add(candidateKey(view));
      task.waitKey = undefined;
      if (task.failedAttempts > this.#o.maxRetries) {
        task.log.warn({ code: outcome.code, attempts: task.failedAttempts, human: `Task ${task.id} failed on ${task.failedAttempts} pool(s) before its first token; giving up` }, 'task failed');
        this.#fail(task, 'WORKER_RESET', `node failed before the first token (${task.failedAttempts} attempts): ${outcome.message}`, true);
        return;
      }
      this.#o.metrics.replacements.inc({ reason: outcome.code });
    }
    task.log.info({
      pool_id: view.pool_id, node_id: view.node_id, code: outcome.code, saturated: outcome.saturated,
      human: outcome.saturated
        ? `Pool ${view.pool_id} had no free slot for task ${task.id}; back to the head of the queue`
        : `Pool ${view.pool_id} on node ${view.node_id} failed task ${task.id} before its first token (${outcome.message}); re-placing`,
    }, 'task re-queued');
    task.state = 'queued';
    task.phase = 'queued';
    task.controller = undefined;
    task.placement = undefined;
    this.#queue.requeueFront(task.id, task.request.priority, task, task.deadlineAt);
    this.pump();
  }

  #fail(task: TaskRecord, code: ErrorCode, message: string, retriable: boolean): void {
    if (task.state === 'ended') return;
    this.#o.metrics.tasksFailed.inc({ engine: ENGINE, code });
    this.#end(task, { event: 'error', data: { code, message, retriable, engine: ENGINE } });
  }

  /** The one place a task ends: writes the terminal frame, aborts upstream, schedules removal. */
  #end(task: TaskRecord, frame: SseFrame): void {
    if (task.state === 'ended') return;
    task.state = 'ended';
    task.stream.append(frame);
    task.controller?.abort();
    this.#running.delete(task);
    if (frame.event === 'end') {
      const placementPool = frame.data.pool_id ?? task.placement?.pool_id ?? '';
      this.#o.metrics.tokensOut.inc({ engine: ENGINE, engine_version: frame.data.engine_version ?? '', pool_id: placementPool }, frame.data.tokens_out);
      this.#o.sessions.taskEnded(task.request.session_id, frame.data.tokens_out);
    } else {
      this.#o.sessions.taskEnded(task.request.session_id, undefined);
    }
    // Only the frames stay for late subscribers: under a flood of short tasks the full records
    // (request, logger, controller) retained for the grace period were most of the heap.
    this.#tasks.delete(task.id);
    this.#ended.set(task.id, { id: task.id, stream: task.stream, state: 'ended' });
    this.#expiries.push({ at: this.#o.clock.now() + this.#o.streamGraceMs, id: task.id });
    // Past the cap the oldest ended task goes now (expiries are in end order, as is the Map).
    if (this.#ended.size > this.#o.streamGraceMaxTasks) this.#expireEnded(Number.NEGATIVE_INFINITY, this.#ended.size - this.#o.streamGraceMaxTasks);
  }

  /** Drops ended tasks whose grace is over, plus the `extra` oldest ones beyond that. */
  #expireEnded(now: number, extra = 0): void {
    const q = this.#expiries;
    let more = extra;
    while (this.#expiryHead < q.length && ((q[this.#expiryHead] as { at: number }).at <= now || more > 0)) {
      if ((q[this.#expiryHead] as { at: number }).at > now) more -= 1;
      this.#ended.delete((q[this.#expiryHead] as { id: string }).id);
      this.#expiryHead += 1;
    }
    if (this.#expiryHead > 1024 && this.#expiryHead * 2 > q.length) {
      q.splice(0, this.#expiryHead);
      this.#expiryHead = 0;
    }
  }

  #housekeeping(): void {
    if (this.#state !== 'running') return;
    const now = this.#o.clock.now();
    this.#expireEnded(now);
    for (const entry of this.#queue.takeExpired(now)) {
      const task = entry.item;
      task.log.warn({ waited_ms: now - task.admittedAt, human: `Task ${task.id} expired in the queue after ${now - task.admittedAt} ms (deadline ${task.request.deadline_ms} ms)` }, 'deadline expired');
      this.#fail(task, 'DEADLINE_UNMET', `deadline of ${task.request.deadline_ms} ms passed while the task was queued`, false);
    }
    for (const task of [...this.#running]) {
      if (task.deadlineAt <= now) {
        task.log.warn({ tokens_out: task.tokens, human: `Task ${task.id} ran past its deadline of ${task.request.deadline_ms} ms; stopped` }, 'deadline expired');
        this.#fail(task, 'DECODE_TIMEOUT', `deadline of ${task.request.deadline_ms} ms passed while the task was running`, true);
      }
    }
    this.#emitQueueMetrics(false);
    this.pump();
  }

  /** `metrics` frames for waiting tasks: on position change, and every metricsIntervalMs. */
  #emitQueueMetrics(positionChangesOnly: boolean): void {
    if (this.#queue.size === 0 && (positionChangesOnly || this.#running.size === 0)) return;
    const now = this.#o.clock.now();
    // Per model: a frame only reads the pools of its task's model (one index lookup, no scan).
    const viewsOf = (task: TaskRecord): readonly PoolView[] => this.#o.registry.poolsForModel(task.request.model_ref);
    const depth = this.#queue.size;
    const aheadByModel = new Map<string, number>();
    let position = 0;
    for (const entry of this.#queue) {
      const task = entry.item;
      const model = task.request.model_ref;
      const ahead = aheadByModel.get(model) ?? 0;
      aheadByModel.set(model, ahead + 1);
      const changed = task.lastPosition !== position;
      if (changed || (!positionChangesOnly && now - task.lastMetricsAt >= this.#o.metricsIntervalMs)) {
        this.#emitMetrics(task, viewsOf(task), depth, position, ahead, now);
      }
      position += 1;
    }
    if (positionChangesOnly) return;
    for (const task of this.#running) {
      if (task.tokens === 0 && now - task.lastMetricsAt >= this.#o.metricsIntervalMs) this.#emitMetrics(task, viewsOf(task), depth, undefined, 0, now);
    }
  }

  #emitMetrics(task: TaskRecord, views: readonly PoolView[], depth: number, position: number | undefined, ahead: number, now: number): void {
    const { data, verbose, phase } = metricsFrame({ task, views, predictor: this.#predictor, depth, position, ahead, now });
    task.phase = phase;
    task.stream.append({ event: 'metrics', data }, { event: 'metrics', data: verbose });
    task.lastPosition = position;
    task.lastMetricsAt = now;
  }
}
