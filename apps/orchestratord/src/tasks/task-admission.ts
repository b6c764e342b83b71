import type { TaskRequest } from '@llama-orch/contracts';
import type { Clock, Log } from '@llama-orch/daemon-support';
import { checkAdmission, checkQueued, checkServed, maxAheadForDeadline, type AdmissionCheckInput } from '../admission/admission-checks.js';
import { predictTask } from '../admission/prediction.js';
import type { AdmissionQueue, QueuePolicy } from '../admission/admission-queue.js';
import { preparationSteps, type ModelAvailability } from '../admission/model-availability.js';
import type { Prediction, Predictor } from '../admission/predictor.js';
import { InternalError, InvalidParamsError, QueueFullError } from '../errors.js';
import type { NodeRegistry } from '../registry/node-registry.js';
import type { PoolRef } from '../scheduling/placement.js';
import { ownedSessionId } from '../sessions/session-ids.js';
import type { SessionStore } from '../sessions/session-store.js';
import type { ClusterTasks } from './cluster-tasks.js';
import type { TaskObserver } from './task-observer.js';
import { newTaskRecord, type Delivery, type TaskRecord } from './task-record.js';
import type { TaskTable } from './task-table.js';
import type { Admitted } from './task-service-types.js';

/** The task service's parts admission reads and writes. */
export interface TaskAdmissionDeps {
  readonly registry: NodeRegistry;
  readonly predictor: Predictor;
  readonly sessions: SessionStore;
  readonly clock: Clock;
  readonly observer: TaskObserver;
  /** This replica's queue: the whole queue in-process; with a Redis store, the mirror of the tasks queued here. */
  readonly queue: AdmissionQueue<TaskRecord>;
  readonly table: TaskTable;
  /** The cluster's side (Redis store), else undefined. */
  readonly cluster: ClusterTasks | undefined;
  readonly ctxMax: number;
  readonly admissionCapacity: number;
  /** Whether the service still admits. */
  running(): boolean;
  /** Ends a task `drop-lru` evicted for `by`. */
  evict(victim: TaskRecord, by: TaskRecord): void;
  pump(): void;
}

interface Admission {
  readonly request: TaskRequest;
  readonly modelName: string;
  readonly log: Log;
  readonly correlationId: string;
  readonly clientKey: string | undefined;
  readonly delivery: Delivery | undefined;
}

/**
 * Admission: validates a task against the live cluster, queues it and writes its `started` frame.
 * In-process the answer is synchronous (no promise per request); with a Redis store the cluster's
 * queue decides capacity, policy and position, so the answer is a promise.
 */
export class TaskAdmission {
  readonly #d: TaskAdmissionDeps;

  constructor(deps: TaskAdmissionDeps) {
    this.#d = deps;
  }

  /**
   * Validates a task against the live cluster, enqueues it, writes its `started` frame and pumps
   * (a task with a free slot is dispatched before this returns). Throws typed errors
   * (INVALID_PARAMS, DEADLINE_UNMET, MODEL_NOT_AVAILABLE, ADMISSION_REJECT, QUEUE_FULL_DROP_LRU)
   * that the error handler maps to envelopes — with a Redis store the promise rejects with them.
   * `log` and `correlationId` are the admitting request's: the task's log lines and its
   * dispatches carry them; `clientKey` the name of the key that sent it: the task's owner (only it
   * and operator keys see the task) and its session's namespace, and its tokens are counted under
   * that name; `delivery` how its output goes out.
   */
  admit(named: TaskRequest, log: Log, correlationId: string, clientKey?: string, delivery?: Delivery): Admitted | Promise<Admitted> {
    if (!this.#d.running()) throw new InternalError('orchestratord is shutting down', { retriable: true, retryAfterMs: 1000 });
    // An alias becomes the model ref the pools list: one queue group, one wait key per model.
    const modelRef = this.#d.registry.canonicalModel(named.model_ref);
    // The session is the key's own: the same session id under another key is another session.
    const sessionId = ownedSessionId(clientKey, named.session_id);
    const request = modelRef === named.model_ref && sessionId === named.session_id ? named : { ...named, model_ref: modelRef, session_id: sessionId };
    if (this.#d.table.has(request.task_id)) throw new InvalidParamsError(`task_id: task ${request.task_id} already exists`);
    const admission = { request, modelName: named.model_ref, log, correlationId, clientKey, delivery };
    if (this.#d.cluster !== undefined) return this.#admitShared(this.#d.cluster, admission);
    const { avail, prediction, task } = this.#prepare(admission, this.#d.queue.countAhead(request.model_ref, request.priority));
    const result = this.#d.queue.enqueue(task.id, request.priority, task, task.deadlineAt);
    if (result.kind === 'full') throw this.#queueFull(task, result.policy, prediction, this.#d.queue.size);
    const victim = result.evicted?.item;
    return this.#accepted(task, result.position, avail, prediction, victim);
  }

  /**
   * With a Redis store: one round trip. The checks that need neither the queue nor the session run
   * here first; the budget and the deadline are decided in the store's admission step, on the queue
   * and session as they are there (the deadline as the most tasks ahead it allows), together with
   * capacity, policy and position (cluster-tasks.ts).
   */
  async #admitShared(cluster: ClusterTasks, a: Admission): Promise<Admitted> {
    const r = a.request;
    const { availability: avail, listed } = checkServed(this.#checkInput(r));
    const now = this.#d.clock.now();
    const shared = { request: r, admittedAt: now, modelName: a.modelName, correlationId: a.correlationId, clientKey: a.clientKey, delivery: a.delivery ?? 'events' };
    const added = await cluster.add(shared, maxAheadForDeadline(this.#d.predictor, r, listed, this.#d.admissionCapacity));
    if (added.kind === 'exists') {
      // The same request again (a client's retry, or a balancer that re-sent the POST of a replica that died answering it): answered as admitted.
      if (await cluster.admittedAlready({ id: r.task_id, request: r }))
        return { task_id: r.task_id, queue_position: 0, predicted_start_ms: 0, backoff_ms: 0, preparation: { steps: [] }, dispatched: false };
      throw new InvalidParamsError(`task_id: task ${r.task_id} already exists`);
    }
    const { view } = added;
    // Refused in the store: the same typed error as in-process (checkQueued throws it on the view the store read).
    if (added.kind === 'spent' || added.kind === 'late') {
      checkQueued(this.#checkInput(r, view.ahead, view.budgetRemaining), listed);
      throw new InternalError(`the cluster store refused the task (${added.kind}) where this replica's checks pass; resubmit it`, { retriable: true, retryAfterMs: 1000 });
    }
    // Not re-checked: the predictor may have learnt something during the round trip, but the task is admitted.
    const prediction = predictTask(this.#d.predictor, r, view.ahead, listed);
    const task = newTaskRecord({ ...a, affinity: view.lastPool, now, predictedStartMs: prediction.startMs, phase: avail.ready.length > 0 ? 'queued' : 'preparing' });
    // Full means full to its capacity: the cluster's queue holds that many now.
    if (added.kind === 'full') throw this.#queueFull(task, added.policy, prediction, this.#d.admissionCapacity);
    if (!this.#d.running() || this.#d.table.has(task.id)) {
      cluster.withdraw(task, 'orchestratord is shutting down');
      throw new InternalError('orchestratord is shutting down', { retriable: true, retryAfterMs: 1000 });
    }
    this.#d.queue.enqueue(task.id, r.priority, task, task.deadlineAt);
    // An evicted task of another replica is ended there (its owner finds its entry gone).
    const victim = added.evicted === undefined ? undefined : this.#d.table.live(added.evicted.id);
    if (victim !== undefined) this.#d.queue.remove(victim.id);
    return this.#accepted(task, added.position, avail, prediction, victim?.state === 'queued' ? victim : undefined);
  }

  #checkInput(request: TaskRequest, ahead = 0, budgetRemaining: number | undefined = undefined): AdmissionCheckInput {
    return {
      request,
      views: this.#d.registry.poolsForModel(request.model_ref),
      predictor: this.#d.predictor,
      ahead,
      ctxMax: this.#d.ctxMax,
      budgetRemaining,
      retryAfterMs: this.#d.registry.heartbeatIntervalMs,
      onReject: (code) => this.#d.observer.refused(code),
    };
  }

  /** Checks the task against the live cluster (typed errors) and builds its record. */
  #prepare(a: Admission, ahead: number): { avail: ModelAvailability; prediction: Prediction; task: TaskRecord } {
    const { request } = a;
    const session = this.#localSession(request.session_id);
    const { availability: avail, prediction } = checkAdmission(this.#checkInput(request, ahead, session.budgetRemaining));
    const task = newTaskRecord({
      ...a,
      affinity: session.lastPool,
      now: this.#d.clock.now(),
      predictedStartMs: prediction.startMs,
      phase: avail.ready.length > 0 ? 'queued' : 'preparing',
    });
    return { avail, prediction, task };
  }

  #queueFull(task: TaskRecord, policy: QueuePolicy, prediction: Prediction, size: number): QueueFullError {
    const capacity = this.#d.admissionCapacity;
    this.#d.observer.queueFull(task.log, task.id, policy, size, capacity);
    const code = policy === 'reject' ? 'ADMISSION_REJECT' : 'QUEUE_FULL_DROP_LRU';
    const message = `admission queue is full (${capacity} tasks, policy ${policy})`;
    return new QueueFullError(code, message, { policyLabel: policy, retryAfterMs: Math.max(1000, prediction.serviceMs ?? 1000) });
  }

  /** The task is queued at `position`: into the table, its `started` frame, and a pump (a free slot dispatches it now). */
  #accepted(task: TaskRecord, position: number, avail: ModelAvailability, prediction: Prediction, victim: TaskRecord | undefined): Admitted {
    this.#d.table.add(task);
    // With a Redis store the admission script started the session's turn.
    if (this.#d.cluster === undefined) this.#d.sessions.taskStarted(task.request.session_id);
    task.lastPosition = position;
    task.stream.append({ event: 'started', data: { queue_position: position, predicted_start_ms: prediction.startMs } });
    this.#d.observer.admitted(task, position);
    if (victim !== undefined) this.#d.evict(victim, task);
    const steps = avail.ready.length > 0 ? [] : preparationSteps(avail.provisioning);
    this.#d.pump();
    return {
      task_id: task.id,
      queue_position: position,
      predicted_start_ms: prediction.startMs,
      backoff_ms: 0,
      preparation: { steps },
      dispatched: task.state === 'running',
    };
  }

  #localSession(id: string): { lastPool: PoolRef | undefined; budgetRemaining: number | undefined } {
    return { lastPool: this.#d.sessions.lastPool(id), budgetRemaining: this.#d.sessions.budgetRemaining(id) };
  }
}
