import type { Context } from '@opentelemetry/api';
import type { AdmissionResponse, ErrorCode, SseFrame, TaskRequest } from '@llama-orch/contracts';
import type { Clock, Log } from '@llama-orch/daemon-support';
import type { AdmissionCheckInput } from '../admission/admission-checks.js';
import type { QueuePolicy } from '../admission/admission-queue.js';
import type { ModelAvailability } from '../admission/model-availability.js';
import type { Prediction } from '../admission/predictor.js';
import type { QueueFullError } from '../errors.js';
import type { AdmissionQueue } from '../admission/admission-queue.js';
import type { Lease, PoolView } from '../registry/pool-view.js';
import type { PlacementReason, PoolRef } from '../scheduling/placement.js';
import type { WaitingLine } from '../scheduling/scheduler.js';
import type { SessionPool } from '../sessions/session-store.js';
import type { AttemptOutcome } from '../upstream/dispatch-attempt.js';
import type { Adoption } from './shared/shared-task-types.js';
import type { Delivery, TaskRecord } from './task-record.js';
import type { TaskTable } from './task-table.js';
import type { TaskTrace } from './task-trace.js';

/** AdmissionResponse without the stream URLs (the route knows the public address). */
export type AdmissionResult = Omit<AdmissionResponse, 'streams'>;

/** What `admit` decided: the 202's fields, and whether the task went to a node at once. */
export interface Admitted extends AdmissionResult {
  readonly dispatched: boolean;
}

/** Who admits a task, and how its output goes out: the admitting request's side of it. */
export interface AdmissionSource {
  /** The request's logger: the task's lines are its children (they carry its correlation and trace ids). */
  readonly log: Log;
  /** The request's correlation id; sent with every dispatch of the task. */
  readonly correlationId: string;
  /** The key that sent it: the task's owner (only it and operator keys see the task). */
  readonly clientKey?: string | undefined;
  /** How its output goes out. @default 'events' */
  readonly delivery?: Delivery | undefined;
  /** The API it came through (`v2`, or the door's name). @default 'v2' */
  readonly door?: string | undefined;
  /** The request's trace context (its server span): the task's spans are its children. */
  readonly traceParent?: Context | undefined;
}

/** A task being admitted: the request as it will run, and who sent it. */
export interface Admission extends AdmissionSource {
  readonly request: TaskRequest;
  readonly modelName: string;
  /** Its spans, when tracing is on. */
  readonly trace?: TaskTrace | undefined;
}

/** The session facts a task is checked and placed with. */
export interface SessionView {
  readonly lastPool: PoolRef | undefined;
  readonly budgetRemaining: number | undefined;
}

/** The steps of admission a coordinator runs in its own order (task-coordinator.ts). */
export interface AdmissionSteps {
  readonly clock: Clock;
  readonly admissionCapacity: number;
  /** Whether the service still admits (and has not got the task already). */
  open(id: string): boolean;
  checkInput(request: TaskRequest, ahead?: number, budgetRemaining?: number): AdmissionCheckInput;
  predict(request: TaskRequest, ahead: number, listed: readonly PoolView[]): Prediction;
  /** The most tasks of its model ahead of it that its deadline allows. */
  maxAhead(request: TaskRequest, listed: readonly PoolView[]): number | undefined;
  /** Checks the task against the live cluster with `ahead` tasks before it (typed errors) and builds its record. */
  prepare(
    a: Admission,
    ahead: number,
    session: SessionView,
  ): { avail: ModelAvailability; prediction: Prediction; task: TaskRecord };
  record(a: Admission, session: SessionView, prediction: Prediction, avail: ModelAvailability, now: number): TaskRecord;
  queueFull(task: TaskRecord, policy: QueuePolicy, prediction: Prediction, size: number): QueueFullError;
  /** The task is queued at `position`: into the table, its `started` frame, and a pump. */
  accepted(
    task: TaskRecord,
    position: number,
    avail: ModelAvailability,
    prediction: Prediction,
    victim: TaskRecord | undefined,
  ): Admitted;
}

/**
 * What a coordinator may do to the task service's tasks. The service hands it over when it builds
 * its coordinator ({@link CoordinatorFactory}), so a coordinator never reaches into the service.
 */
export interface CoordinatorHost {
  /** This replica's line of queued tasks (the scheduler's). */
  readonly queue: AdmissionQueue<TaskRecord>;
  readonly table: TaskTable;
  /** The task may go: dispatch it to `view` on `lease` (`clusterLease`: a cluster slot lease it holds already). */
  dispatch(task: TaskRecord, view: PoolView, lease: Lease, reason: PlacementReason, clusterLease?: string): void;
  fail(task: TaskRecord, code: ErrorCode, message: string, retriable: boolean): void;
  /** Something changed that a pump would act on. */
  pump(): void;
  /** A task of a replica that died is this one's now: queue it or re-attach to its dispatch. */
  adopt(a: Adoption): void;
  /** The task is back in line (an attempt failed before its first token). */
  requeued(task: TaskRecord): void;
  /** The task is replica `to`'s now (it took it over while this one stalled): it ends here without a frame, its readers follow it there. */
  handOff(task: TaskRecord, to: string): void;
  crashed(task: TaskRecord, err: unknown): void;
}

/**
 * The seam between the task service and "the cluster": the moments of a task where one process and
 * several replicas sharing a store differ — admit, claim (the scheduler's line, a slot given to a
 * task, the attempt's slot lease), requeue, end, and the events lost and adopted (which a shared
 * coordinator reports through the host). Two implementations: {@link LocalCoordinator} (one
 * process: this queue is the whole queue, sessions in memory, all synchronous) and
 * `SharedCoordinator` (the cluster store: the cluster's queue decides, a task is owned under a
 * fence, its end is written before its clients see it). The task service asks nothing else of the
 * cluster, and never which one it has.
 */
export interface TaskCoordinator {
  /** Whether `metrics` frames may go out between a dispatch and its first token (not where another replica may take the task over and number its frames alike). */
  readonly runningFrames: boolean;
  /** How long a node keeps a dropped `/v2` dispatch for a re-attach (`reattach_ms`); undefined: no re-attach. */
  readonly reattachMs: number | undefined;
  /** Admits a task checked by `steps`: where its capacity, position and session come from. Rejects with the typed refusals. */
  admit(a: Admission, steps: AdmissionSteps): Promise<Admitted>;
  /** The line the scheduler takes tasks from. */
  line(): WaitingLine<TaskRecord>;
  /** The scheduler leased a slot of `view` for the task (it left the line). */
  assigned(task: TaskRecord, view: PoolView, lease: Lease, reason: PlacementReason): void;
  /** Tasks out of the line whose claim is under way (they still count as queued). */
  claiming(): Record<'interactive' | 'batch', number> | undefined;
  /** Runs one attempt under whatever slot lease the cluster needs (`held`: taken already when claimed). */
  attempt(
    task: TaskRecord,
    view: PoolView,
    resume: boolean,
    held: string | undefined,
    run: () => Promise<AttemptOutcome>,
  ): Promise<AttemptOutcome>;
  /** Applies an attempt's outcome with `settle`, unless the task moved to another replica meanwhile. */
  settle(task: TaskRecord, outcome: AttemptOutcome, settle: () => void): void;
  /** The attempt failed before its first token: the task goes back in line (the host's `requeued`), or fails. */
  requeue(task: TaskRecord): void;
  /** The one ending: records it (session turn; the shared record) and then `deliver`s the terminal frame to the clients. */
  ended(task: TaskRecord, frame: SseFrame, served: SessionPool | undefined, queued: boolean, deliver: () => void): void;
  /** The task was handed off to another replica: this one holds nothing of it any more (no fence, no end to write). */
  movedAway(task: TaskRecord): void;
  /** The task ended while its attempt still ran: stop what a node holds for it beyond the attempt. */
  abortHeld(task: TaskRecord): void;
  /** Housekeeping (the task service's tick). */
  tick(now: number): void;
  close(): Promise<void>;
}

/** How the task service gets its coordinator (TaskServiceOptions.coordinator). */
export interface CoordinatorFactory {
  /** Most tasks this replica's own queue holds: the whole capacity in one process; unbounded where the shared queue holds the capacity. */
  readonly localCapacity: number;
  /** The coordinator over the task service's parts. */
  create(host: CoordinatorHost): TaskCoordinator;
}
