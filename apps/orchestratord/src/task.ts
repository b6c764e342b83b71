import type { EndEvent, TaskRequest } from '@llama-orch/contracts';
import type { Log } from './log.js';
import type { Lease } from './node-registry.js';
import { TaskStream } from './task-stream.js';

/**
 * Lifecycle of an admitted task: `queued` (in the admission queue) → `running` (slot leased,
 * dispatched to a node) → `ended` (terminal frame written). A task that lost its node before the
 * first token goes back to `queued` once. `ended` is final; only its frames stay
 * readable, for `stream_grace_ms`.
 */
export type TaskState = 'queued' | 'running' | 'ended';

/** Finer phase for narration: what a running/queued task is waiting on. */
export type TaskPhase = 'queued' | 'preparing' | 'dispatching' | 'streaming';

export interface TaskPlacement {
  readonly node_id: string;
  readonly pool_id: string;
  readonly engine_version: string;
  readonly address: string;
}

export interface TaskRecord {
  readonly id: string;
  readonly request: TaskRequest;
  readonly stream: TaskStream;
  /** Child of the admission request's logger: carries its correlation id and the task id. */
  readonly log: Log;
  readonly admittedAt: number;
  readonly deadlineAt: number;
  readonly predictedStartMs: number;
  state: TaskState;
  phase: TaskPhase;
  /** Failed attempts before the first token (node loss, broken stream). */
  failedAttempts: number;
  /** Pools that failed this task (`node/pool`), avoided when re-placing. */
  readonly exclude: Set<string>;
  controller: AbortController | undefined;
  lease: Lease | undefined;
  placement: TaskPlacement | undefined;
  /** Token frames relayed so far. */
  tokens: number;
  dispatchedAt: number | undefined;
  firstTokenAt: number | undefined;
  lastPosition: number | undefined;
  lastMetricsAt: number;
  /** Whether `placement_decisions_total{outcome=no_capacity}` was counted for it. */
  waitCounted: boolean;
  /** Whether `tasks_started_total` was counted (once per task, not per attempt). */
  startedCounted: boolean;
  /** Placement-equivalence key (see dispatcher `waitKey`); undefined until computed or after `exclude` changed. */
  waitKey: string | undefined;
}

/** An ended task within `stream_grace_ms`: what late subscribers and resumes read. */
export interface RetainedTask {
  readonly id: string;
  readonly stream: TaskStream;
  readonly state: 'ended';
}

export interface NewTaskOptions {
  request: TaskRequest;
  /** Logger of the admission request; the task's logger is a child of it. */
  log: Log;
  now: number;
  predictedStartMs: number;
  phase: TaskPhase;
}

export function newTaskRecord(o: NewTaskOptions): TaskRecord {
  const r = o.request;
  return {
    id: r.task_id,
    request: r,
    stream: new TaskStream(),
    log: o.log.child({ task_id: r.task_id, session_id: r.session_id }),
    admittedAt: o.now,
    deadlineAt: o.now + r.deadline_ms,
    predictedStartMs: o.predictedStartMs,
    state: 'queued',
    phase: o.phase,
    failedAttempts: 0,
    exclude: new Set(),
    controller: undefined,
    lease: undefined,
    placement: undefined,
    tokens: 0,
    dispatchedAt: undefined,
    firstTokenAt: undefined,
    lastPosition: undefined,
    lastMetricsAt: o.now,
    waitCounted: false,
    startedCounted: false,
    waitKey: undefined,
  };
}

/**
 * Terminal frame of a cancelled task: tokens relayed so far, time since the first token as the
 * decode time, and where it ran when it was placed.
 */
export function canceledEnd(task: TaskRecord, now: number): EndEvent {
  const decode = task.firstTokenAt === undefined ? 0 : now - task.firstTokenAt;
  const end: EndEvent = { tokens_out: task.tokens, decode_ms: decode, decode_time_ms: decode, stop_type: 'cancel', canceled: true };
  if (task.placement !== undefined) {
    end.pool_id = task.placement.pool_id;
    end.node_id = task.placement.node_id;
    end.engine_version = task.placement.engine_version;
  }
  return end;
}
