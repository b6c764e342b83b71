import { ROOT_CONTEXT, type Tracer } from '@opentelemetry/api';
import type { TaskRequest } from '@llama-orch/contracts';
import type { Clock, Log } from '@llama-orch/daemon-support';
import { checkAdmission, maxAheadForDeadline, type AdmissionCheckInput } from '../admission/admission-checks.js';
import { predictTask } from '../admission/prediction.js';
import type { QueuePolicy } from '../admission/admission-queue.js';
import { preparationSteps, type ModelAvailability } from '../admission/model-availability.js';
import type { Prediction, Predictor } from '../admission/predictor.js';
import { isCopy } from '../catalog/fleet.js';
import type { ModelLoads } from '../catalog/model-loads.js';
import { awaitedCapabilities, type RoomWaits } from '../catalog/room-waits.js';
import { modelNotFound } from '../catalog/model-not-found.js';
import {
  InsufficientMemoryError,
  InternalError,
  InvalidParamsError,
  ModelNotAvailableError,
  NoLoadingNodeError,
  OrchdError,
  QueueFullError,
} from '../errors.js';
import type { NodeRegistry } from '../registry/node-registry.js';
import type { PoolView } from '../registry/pool-view.js';
import type { CatalogStore } from '../store/catalog-store.js';
import { ownedSessionId } from '../sessions/session-ids.js';
import type {
  Admission,
  AdmissionSource,
  AdmissionSteps,
  Admitted,
  SessionView,
  TaskCoordinator,
} from './task-coordinator.js';
import type { TaskObserver } from './task-observer.js';
import { newTaskRecord, type TaskRecord } from './task-record.js';
import { TaskTrace } from './task-trace.js';
import type { TaskTable } from './task-table.js';

/** The task service's parts admission reads and writes. */
export interface TaskAdmissionDeps {
  readonly registry: NodeRegistry;
  readonly predictor: Predictor;
  readonly clock: Clock;
  readonly observer: TaskObserver;
  readonly table: TaskTable;
  /** Where the task goes once checked: the whole queue in one process, the cluster's with a store. */
  readonly coordinator: TaskCoordinator;
  readonly ctxMax: number;
  readonly admissionCapacity: number;
  /** Read only for a model no pool serves (a refusal's path): a catalog model is 503, an unknown name 404. */
  readonly catalog?: Pick<CatalogStore, 'get'> | undefined;
  /** Load on first request (TaskServiceOptions.loads); absent = a catalog model loaded nowhere is 503. */
  readonly loads?:
    | {
        readonly loader: Pick<ModelLoads, 'whenServable'>;
        readonly waitMs: number;
        /** Where a model no node has room for waits (its tasks stay queued); absent = refused 503. */
        readonly room?: Pick<RoomWaits, 'wait' | 'waitingFor' | 'waitsFor'> | undefined;
      }
    | undefined;
  /** Makes each task's spans; undefined with tracing off (no span work at all). */
  readonly tracer?: Tracer | undefined;
  /** Whether the service still admits. */
  running(): boolean;
  /** Ends a task `drop-lru` evicted for `by`. */
  evict(victim: TaskRecord, by: TaskRecord): void;
  pump(): void;
}

/**
 * Admission: validates a task against the live cluster, hands it to the coordinator, which queues
 * it (in this process or in the cluster's queue), and writes its `started` frame.
 */
export class TaskAdmission implements AdmissionSteps {
  readonly #d: TaskAdmissionDeps;

  constructor(deps: TaskAdmissionDeps) {
    this.#d = deps;
  }

  get clock(): Clock {
    return this.#d.clock;
  }

  get admissionCapacity(): number {
    return this.#d.admissionCapacity;
  }

  /**
   * Validates a task against the live cluster, enqueues it, writes its `started` frame and pumps
   * (in one process, a task with a free slot is dispatched before the promise settles). Rejects
   * with typed errors (INVALID_PARAMS, DEADLINE_UNMET, MODEL_NOT_FOUND, MODEL_NOT_AVAILABLE,
   * ADMISSION_REJECT, QUEUE_FULL_DROP_LRU) that the error handler maps to envelopes. `source` is
   * the admitting request's side: its log and correlation id (the task's lines and dispatches carry
   * them), the key that sent it (the task's owner, its session's namespace, the key its tokens are
   * counted under), how its output goes out, and its trace context (with tracing on, the task's
   * spans start here, under it).
   */
  async admit(named: TaskRequest, source: AdmissionSource): Promise<Admitted> {
    const tracer = this.#d.tracer;
    if (tracer === undefined) return this.#admit(named, source, undefined);
    const trace = TaskTrace.admitting(tracer, source.traceParent ?? ROOT_CONTEXT, {
      id: named.task_id,
      request: named,
      modelName: named.model_ref,
      door: source.door ?? 'v2',
    });
    try {
      const admitted = await this.#admit(named, source, trace);
      // Not recorded here (the same task admitted before, answered as admitted): nothing more to trace.
      trace.unrecorded();
      return admitted;
    } catch (err) {
      trace.refused(err instanceof OrchdError ? err.code : 'INTERNAL', (err as Error).message);
      throw err;
    }
  }

  async #admit(named: TaskRequest, source: AdmissionSource, trace: TaskTrace | undefined): Promise<Admitted> {
    const { clientKey } = source;
    if (!this.#d.running())
      throw new InternalError('orchestratord is shutting down', { retriable: true, retryAfterMs: 1000 });
    // An alias becomes the model ref the pools list: one queue group, one wait key per model.
    const views = this.#d.registry.poolsForModel(named.model_ref);
    const modelRef = views.some(isCopy)
      ? this.#d.registry.canonicalModel(named.model_ref)
      : await this.#unserved(named.model_ref, views.length > 0, named.deadline_ms);
    // The session is the key's own: the same session id under another key is another session.
    const sessionId = ownedSessionId(clientKey, named.session_id);
    const request =
      modelRef === named.model_ref && sessionId === named.session_id
        ? named
        : { ...named, model_ref: modelRef, session_id: sessionId };
    if (this.#d.table.has(request.task_id))
      throw new InvalidParamsError(`task_id: task ${request.task_id} already exists`);
    return this.#d.coordinator.admit({ ...source, request, modelName: named.model_ref, trace }, this);
  }

  /**
   * A name no pool serves or prepares (the catalog is read only here, off the served path): an
   * alias the catalog gives a model pools serve under another of its names is that model; a catalog
   * model loaded nowhere is loaded now (`loads`: the task then waits for it in the queue) or, without
   * `loads`, 503 MODEL_NOT_AVAILABLE; a name only failed or offline static pools list goes on to
   * admission's own 503; anything else is 404 MODEL_NOT_FOUND.
   */
  async #unserved(name: string, listed: boolean, deadlineMs: number): Promise<string> {
    const entry = await this.#d.catalog?.get(name);
    if (entry === undefined) {
      if (listed) return this.#d.registry.canonicalModel(name);
      this.#d.observer.refused('MODEL_NOT_FOUND');
      throw modelNotFound(name);
    }
    const served = [entry.ref, ...entry.aliases].find((n) => this.#d.registry.poolsForModel(n).some(isCopy));
    if (served !== undefined) return this.#d.registry.canonicalModel(served);
    const loads = this.#d.loads;
    if (loads === undefined) {
      this.#d.observer.refused('MODEL_NOT_AVAILABLE');
      throw new ModelNotAvailableError(
        `model '${name}' is in the catalog but not loaded on any node (POST /v2/catalog/models/{id}/load loads it)`,
        { retryAfterMs: this.#d.registry.heartbeatIntervalMs },
      );
    }
    try {
      return this.#d.registry.canonicalModel(await loads.loader.whenServable(entry, loads.waitMs));
    } catch (err) {
      // No node has room and nothing idle may go: the task waits in the queue for room (room-waits.ts).
      if (err instanceof InsufficientMemoryError && !(err instanceof NoLoadingNodeError) && loads.room !== undefined) {
        loads.room.wait(entry, this.#d.clock.now() + deadlineMs);
        return entry.ref;
      }
      if (err instanceof OrchdError) this.#d.observer.refused(err.code);
      throw err;
    }
  }

  open(id: string): boolean {
    return this.#d.running() && !this.#d.table.has(id);
  }

  checkInput(request: TaskRequest, ahead = 0, budgetRemaining: number | undefined = undefined): AdmissionCheckInput {
    const waiting = this.#d.loads?.room?.waitingFor(request.model_ref);
    return {
      ...(waiting !== undefined
        ? { awaiting: { ctx: waiting.policy.ctx, capabilities: awaitedCapabilities(waiting.policy.serve) } }
        : {}),
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

  predict(request: TaskRequest, ahead: number, listed: readonly PoolView[]): Prediction {
    return predictTask(this.#d.predictor, request, ahead, listed);
  }

  maxAhead(request: TaskRequest, listed: readonly PoolView[]): number | undefined {
    return maxAheadForDeadline(this.#d.predictor, request, listed, this.#d.admissionCapacity);
  }

  prepare(
    a: Admission,
    ahead: number,
    session: SessionView,
  ): { avail: ModelAvailability; prediction: Prediction; task: TaskRecord } {
    const { availability: avail, prediction } = checkAdmission(
      this.checkInput(a.request, ahead, session.budgetRemaining),
    );
    return { avail, prediction, task: this.record(a, session, prediction, avail, this.#d.clock.now()) };
  }

  record(
    a: Admission,
    session: SessionView,
    prediction: Prediction,
    avail: ModelAvailability,
    now: number,
  ): TaskRecord {
    return newTaskRecord({
      ...a,
      affinity: session.lastPool,
      now,
      predictedStartMs: prediction.startMs,
      phase: avail.ready.length > 0 ? 'queued' : 'preparing',
    });
  }

  queueFull(task: TaskRecord, policy: QueuePolicy, prediction: Prediction, size: number): QueueFullError {
    const capacity = this.#d.admissionCapacity;
    this.#d.observer.queueFull(task.log, task.id, policy, size, capacity);
    const code = policy === 'reject' ? 'ADMISSION_REJECT' : 'QUEUE_FULL_DROP_LRU';
    const message = `admission queue is full (${capacity} tasks, policy ${policy})`;
    return new QueueFullError(code, message, {
      policyLabel: policy,
      retryAfterMs: Math.max(1000, prediction.serviceMs ?? 1000),
    });
  }

  accepted(
    task: TaskRecord,
    position: number,
    avail: ModelAvailability,
    prediction: Prediction,
    victim: TaskRecord | undefined,
  ): Admitted {
    this.#d.table.add(task);
    task.lastPosition = position;
    task.stream.append({
      event: 'started',
      data: { queue_position: position, predicted_start_ms: prediction.startMs },
    });
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
}
