import type { TaskRequest } from '@llama-orch/contracts';
import type { Log } from './log.js';
import type { Lease } from './node-registry.js';
import type { TaskStream } from './task-stream.js';

/**
 * Lifecycle of an admitted task: `queued` (in the admission queue) → `running` (slot leased,
 * dispatched to a node) → `ended` (terminal frame written). A task that lost its node before the
 * first token goes back to `queued` once. `ended` is final; the record is dropped
 * `stream_grace_ms` later.
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
}
