import type { SseFrame, TaskInfo, TaskOutcome } from '@llama-orch/contracts';
import type { Log } from '@llama-orch/daemon-support';
import type { TaskRecordEntry, TaskRecordStore } from '../store/task-record-store.js';
import type { TaskRecord } from './task-record.js';

export interface TaskJournalOptions {
  readonly store: TaskRecordStore;
  /** This replica's id: the entry's owner, where the task's live view is. */
  readonly owner: string;
  /** How long an ended task's entry is kept (ORCHD_TASK_RETENTION_MS). */
  readonly retainMs: number;
  /** Where a failed write is told (a lost write costs a stale record, never the task). */
  readonly log: Log;
}

/**
 * Writes each task's record (the contracts' TaskInfo) to the record store at the three moments a
 * client asking about it would see change: admitted (queued), placed (running, on which pool) and
 * ended (outcome, usage, timings). Never per token, and never in the task's way: writes are fire
 * and forget, in order on the store's connection, and a failure is logged, not raised — the task
 * itself lives in the task service whatever the record store says.
 */
export class TaskJournal {
  readonly #store: TaskRecordStore;
  readonly #owner: string;
  readonly #retainMs: number;
  readonly #log: Log;

  constructor(o: TaskJournalOptions) {
    this.#store = o.store;
    this.#owner = o.owner;
    this.#retainMs = o.retainMs;
    this.#log = o.log;
  }

  /** The task as it stands now: admitted (queued), or placed or adopted (running there). */
  changed(task: TaskRecord): void {
    this.#write(task, taskInfo(task));
  }

  ended(task: TaskRecord, frame: SseFrame, now: number): void {
    this.#write(task, endedInfo(task, frame, now));
  }

  #write(task: TaskRecord, info: TaskInfo): void {
    const entry: TaskRecordEntry = {
      id: task.id,
      state: info.state,
      model: task.modelName,
      modelRef: task.request.model_ref,
      priority: task.request.priority,
      admittedAt: task.admittedAt,
      clientKey: task.clientKey,
      owner: this.#owner,
      body: JSON.stringify(info),
    };
    // A live task's entry outlives its deadline by the retention, so a task whose end was never
    // written (its replica died) is still forgotten in time.
    const ttlMs = info.state === 'ended' ? this.#retainMs : task.deadlineAt - task.admittedAt + this.#retainMs;
    this.#store.put(entry, ttlMs).catch((err: unknown) => {
      this.#log.warn(
        { task_id: task.id, err, human: `Could not write the record of task ${task.id}: ${(err as Error).message}` },
        'task record not written',
      );
    });
  }
}

/** A task's record as it stands now (queued or running; an ended task's comes from {@link endedInfo}). */
export function taskInfo(task: TaskRecord): TaskInfo {
  const r = task.request;
  const info: TaskInfo = {
    task_id: task.id,
    state: task.state,
    model: task.modelName,
    model_ref: r.model_ref,
    priority: r.priority,
    workload: r.workload,
    door: task.door,
    correlation_id: task.correlationId,
    admitted_at: task.admittedAt,
    attempts: task.failedAttempts + (task.dispatchedAt === undefined ? 0 : 1),
    usage: { tokens_out: task.tokens },
    timings: {},
  };
  if (info.state === 'queued') {
    info.queue_position = task.lastPosition ?? 0;
    info.predicted_start_ms = Math.max(0, Math.round(task.predictedStartMs));
  }
  if (task.placement !== undefined) {
    info.pool_id = task.placement.pool_id;
    info.node_id = task.placement.node_id;
  }
  if (task.dispatchedAt !== undefined) {
    info.timings.dispatched_at = task.dispatchedAt;
    info.timings.queued_ms = Math.max(0, task.dispatchedAt - task.admittedAt);
  }
  if (task.firstTokenAt !== undefined) {
    info.timings.first_token_at = task.firstTokenAt;
    info.timings.first_token_ms = Math.max(0, task.firstTokenAt - task.admittedAt);
  }
  return info;
}

/** The record of a task whose terminal `frame` was written at `now`. */
export function endedInfo(task: TaskRecord, frame: SseFrame, now: number): TaskInfo {
  const info = taskInfo(task);
  info.state = 'ended';
  delete info.queue_position;
  delete info.predicted_start_ms;
  info.timings.ended_at = now;
  info.timings.total_ms = Math.max(0, now - task.admittedAt);
  info.outcome = outcomeOf(frame);
  if (frame.event === 'end') {
    const end = frame.data;
    info.usage.tokens_out = end.tokens_out;
    if (end.prompt_tokens !== undefined) info.usage.tokens_in = end.prompt_tokens;
    if (end.cached_tokens !== undefined) info.usage.cached_tokens = end.cached_tokens;
    if (end.pool_id !== undefined) info.pool_id = end.pool_id;
    if (end.node_id !== undefined) info.node_id = end.node_id;
  }
  return info;
}

function outcomeOf(frame: SseFrame): TaskOutcome {
  if (frame.event === 'error')
    return { result: 'error', error: { code: frame.data.code, message: frame.data.message } };
  if (frame.event !== 'end') return { result: 'error' };
  const end = frame.data;
  const outcome: TaskOutcome = { result: end.canceled === true ? 'canceled' : 'completed', stop_type: end.stop_type };
  if (end.finish_reason !== undefined) outcome.finish_reason = end.finish_reason;
  return outcome;
}
