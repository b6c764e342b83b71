import type { DispatchRequest, DispatchResultEvent, EndEvent, TaskRequest } from '@llama-orch/contracts';
import type { Lease, PoolView } from '../registry/pool-view.js';
import type { PoolRef } from '../scheduling/placement.js';
import { PlacementTicket } from '../scheduling/placement-ticket.js';
import { TaskStream } from '../streams/task-stream.js';
import { TaskLifecycle, type TaskPhase, type TaskState } from './task-lifecycle.js';
import type { Log } from '@llama-orch/daemon-support';
import type { AttemptAbort } from '../upstream/attempt-abort.js';
import type { TaskTrace } from './task-trace.js';
import type { EndDispatchEvent } from '../upstream/dispatch-attempt.js';

export type { TaskPhase, TaskState } from './task-lifecycle.js';

/**
 * How the task's output reaches its client: `events` = the `/v2` event stream (resumable with
 * `Last-Event-ID`, on any replica); `stream` = a door's streamed response (streamed /v1 requests:
 * no resume in their protocols); `answer` = one non-streamed answer from the engine (`stream:
 * false` dispatch, non-streamed /v1 requests): no token frames, the answer on the record when
 * `end` is written.
 */
export type Delivery = 'events' | 'stream' | 'answer';

export interface TaskPlacement {
  readonly node_id: string;
  readonly pool_id: string;
  readonly engine_version: string;
  readonly address: string;
}

/** Where a task runs on `view`. */
export function placementOf(view: PoolView): TaskPlacement {
  return {
    node_id: view.node_id,
    pool_id: view.pool_id,
    engine_version: view.snapshot.engine_version,
    address: view.address,
  };
}

export interface TaskRecord {
  readonly id: string;
  readonly request: TaskRequest;
  /** The model as the client named it (`request.model_ref` is the ref an alias stands for). */
  readonly modelName: string;
  /** The admitting request's correlation id; sent with every dispatch of the task. */
  readonly correlationId: string;
  /**
   * Name of the key that admitted it: its owner (only that key and operator keys may read, cancel
   * or resume it) and the `key` label of the per-key token counter; undefined with auth off.
   */
  readonly clientKey: string | undefined;
  readonly stream: TaskStream;
  /** Child of the admission request's logger: every line carries `correlation_id` and `task_id`. */
  readonly log: Log;
  /** Placement constraints, avoided pools and wait key (the scheduler's part of the task). */
  readonly ticket: PlacementTicket;
  readonly admittedAt: number;
  readonly deadlineAt: number;
  readonly predictedStartMs: number;
  readonly delivery: Delivery;
  /** The API it came through: `v2`, or the door's name (`v1`, `responses`, `anthropic`, `embeddings`, …). */
  readonly door: string;
  /** Its spans (task-trace.ts); undefined with tracing off. */
  readonly trace: TaskTrace | undefined;
  /** The node's answer of an `answer` task, once it came (the /v1 door renders it). */
  answer: DispatchResultEvent | undefined;
  /** The owner of `state` and `phase`: every change is a checked transition (task-lifecycle.ts). */
  readonly life: TaskLifecycle;
  /** `life.state`. */
  readonly state: TaskState;
  /** `life.phase`. */
  readonly phase: TaskPhase;
  /** Failed attempts before the first token (node loss, broken stream). */
  failedAttempts: number;
  /** The running attempt's abort switch (undefined while queued). */
  controller: AttemptAbort | undefined;
  lease: Lease | undefined;
  placement: TaskPlacement | undefined;
  /** Token frames relayed so far. */
  tokens: number;
  dispatchedAt: number | undefined;
  /** When a node first accepted a dispatch of the task (its stream opened). */
  acceptedAt: number | undefined;
  /**
   * The running attempt's silence as its node's heartbeats saw it (`tasks/node-faults.ts`,
   * {@link abandonSilentDispatches}); undefined until the node accepts the attempt.
   */
  quiet: DispatchQuiet | undefined;
  firstTokenAt: number | undefined;
  lastPosition: number | undefined;
  lastMetricsAt: number;
  /**
   * Taken over from a replica that died (shared/adoption.ts): its readers are clients reconnecting
   * one attempt at a time, so one that leaves does not cancel it (a resume may come next).
   */
  takenOver?: boolean;
  /**
   * Runs to its end whether or not anyone reads it (a background Response: its client polls or
   * streams it now and then): a reader that leaves does not cancel it; only an explicit cancel does.
   */
  detached?: boolean;
}

/** What the heartbeats of a running attempt's node said while it relayed nothing. */
export interface DispatchQuiet {
  /** `tokens` when the task was last looked at: a change means the attempt made progress. */
  tokens: number;
  /** When the attempt was accepted or last seen making progress (ms, this process's clock). */
  since: number;
  /** Heartbeats sent after `since` that reported the pool with every slot free, in a row. */
  beats: number;
  /** `lastSeen` of the last heartbeat counted (the same heartbeat read twice counts once). */
  lastBeat: number;
}

/** The quiet record of an attempt its node just accepted. */
export function acceptedQuiet(task: Pick<TaskRecord, 'tokens'>, now: number): DispatchQuiet {
  return { tokens: task.tokens, since: now, beats: 0, lastBeat: 0 };
}

/** An ended task within `stream_grace_ms`: what late subscribers and resumes read. */
export interface RetainedTask {
  readonly id: string;
  readonly stream: TaskStream;
  readonly state: 'ended';
  /** Its owner, as {@link TaskRecord.clientKey}. */
  readonly clientKey: string | undefined;
}

export interface NewTaskOptions {
  request: TaskRequest;
  /** The model as the client named it. @default request.model_ref */
  modelName?: string | undefined;
  /** The pool that served the task's session last (placement prefers it while it has a free slot). */
  affinity?: PoolRef | undefined;
  /** Logger of the admission request; the task's logger is a child of it. */
  log: Log;
  correlationId: string;
  clientKey?: string | undefined;
  now: number;
  predictedStartMs: number;
  phase: 'queued' | 'preparing';
  /** @default 'events' */
  delivery?: Delivery | undefined;
  /** @default 'v2' */
  door?: string | undefined;
  /** Its spans, when tracing is on. */
  trace?: TaskTrace | undefined;
  /** A lifecycle made before the record (a takeover holds the task from its grant on). @default a new one in `phase` */
  life?: TaskLifecycle | undefined;
}

/**
 * A task record as a class: `state` and `phase` are getters on its prototype (reading the task's
 * lifecycle), so every record has one shape; an object literal with getters of its own gave each
 * record its own closures and made admission measurably slower.
 */
class Task implements TaskRecord {
  readonly id: string;
  readonly request: TaskRequest;
  readonly modelName: string;
  readonly correlationId: string;
  readonly clientKey: string | undefined;
  readonly stream = new TaskStream();
  readonly log: Log;
  readonly ticket: PlacementTicket;
  readonly admittedAt: number;
  readonly deadlineAt: number;
  readonly predictedStartMs: number;
  readonly delivery: Delivery;
  readonly door: string;
  readonly trace: TaskTrace | undefined;
  readonly life: TaskLifecycle;
  answer: DispatchResultEvent | undefined = undefined;
  failedAttempts = 0;
  controller: AttemptAbort | undefined = undefined;
  lease: Lease | undefined = undefined;
  placement: TaskPlacement | undefined = undefined;
  tokens = 0;
  dispatchedAt: number | undefined = undefined;
  acceptedAt: number | undefined = undefined;
  quiet: DispatchQuiet | undefined = undefined;
  firstTokenAt: number | undefined = undefined;
  lastPosition: number | undefined = undefined;
  lastMetricsAt: number;
  takenOver?: boolean;

  constructor(o: NewTaskOptions) {
    const { request } = o;
    this.id = request.task_id;
    this.request = request;
    this.modelName = o.modelName ?? request.model_ref;
    this.correlationId = o.correlationId;
    this.clientKey = o.clientKey;
    this.log = o.log.child({ task_id: request.task_id, session_id: request.session_id });
    this.ticket = new PlacementTicket(request, o.affinity);
    this.admittedAt = o.now;
    this.deadlineAt = o.now + request.deadline_ms;
    this.predictedStartMs = o.predictedStartMs;
    this.delivery = o.delivery ?? 'events';
    this.door = o.door ?? 'v2';
    this.trace = o.trace;
    this.life = o.life ?? new TaskLifecycle(request.task_id, o.phase);
    this.lastMetricsAt = o.now;
  }

  get state(): TaskState {
    return this.life.state;
  }

  get phase(): TaskPhase {
    return this.life.phase;
  }
}

export function newTaskRecord(options: NewTaskOptions): TaskRecord {
  return new Task(options);
}

/**
 * Terminal frame of a cancelled task: tokens relayed so far, time since the first token as the
 * decode time, and where it ran when it was placed.
 */
export function canceledEnd(task: TaskRecord, now: number): EndEvent {
  const decode = task.firstTokenAt === undefined ? 0 : now - task.firstTokenAt;
  const end: EndEvent = {
    tokens_out: task.tokens,
    decode_ms: decode,
    decode_time_ms: decode,
    stop_type: 'cancel',
    canceled: true,
  };
  if (task.placement !== undefined) {
    end.pool_id = task.placement.pool_id;
    end.node_id = task.placement.node_id;
    end.engine_version = task.placement.engine_version;
  }
  return end;
}

/**
 * What the node is asked to run: the prompt or conversation, the limits and sampling controls, the
 * time left. The strict determinism profile samples greedily and bypasses the prompt cache (a
 * cached prefix is evaluated in a different batch shape, which may change the bytes), and so does
 * a task sent with `kv_hint: "cold"`; every other task reuses the engine's cache for the prefix it
 * already holds.
 */
/**
 * The node's request for the task's next attempt. `reattachMs` (with a Redis store, for `/v2`
 * event streams): how long the node keeps generating when this replica's connection drops without
 * a cancel, so that another replica can re-attach after this one died.
 */
export function dispatchRequest(task: TaskRecord, now: number, reattachMs?: number): DispatchRequest {
  const r = task.request;
  const strict = r.determinism === 'strict';
  const body: DispatchRequest = {
    task_id: r.task_id,
    workload: r.workload,
    max_tokens: r.max_tokens,
    greedy: strict,
    cache_prompt: !strict && r.kv_hint !== 'cold',
    deadline_ms: Math.max(1, task.deadlineAt - now),
  };
  // An engine call (embeddings, rerank, infill) carries the door's body and no prompt of its own.
  if (r.call !== undefined) body.call = r.call;
  else if (r.workload === 'chat') body.messages = r.messages;
  else body.prompt = r.prompt;
  if (r.sampling !== undefined) body.sampling = r.sampling;
  if (r.seed !== undefined) body.seed = r.seed;
  if (task.delivery === 'answer') body.stream = false;
  else if (reattachMs !== undefined && task.delivery === 'events' && r.call === undefined)
    body.reattach_ms = reattachMs;
  return body;
}

/** The task's `end` frame from the node's end event: only what the node reported (one that does not count prompt tokens leaves them out). */
export function endOf(ev: EndDispatchEvent): EndEvent {
  const end: EndEvent = {
    tokens_out: ev.tokens_out,
    decode_ms: ev.decode_ms,
    decode_time_ms: ev.decode_ms,
    pool_id: ev.pool_id,
    node_id: ev.node_id,
    engine_version: ev.engine_version,
    stop_type: ev.stop_type,
  };
  if (ev.prompt_tokens !== undefined) end.prompt_tokens = ev.prompt_tokens;
  if (ev.cached_tokens !== undefined) end.cached_tokens = ev.cached_tokens;
  if (ev.finish_reason !== undefined) end.finish_reason = ev.finish_reason;
  return end;
}
