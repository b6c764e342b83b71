import type { EndEvent, ErrorCode, SseFrame } from '@llama-orch/contracts';
import type { Predictor } from '../admission/predictor.js';
import type { QueuePolicy } from '../admission/admission-queue.js';
import type { PoolView } from '../registry/pool-view.js';
import type { PlacementReason } from '../scheduling/placement.js';
import type { OrchdMetrics } from '../support/metrics.js';
import type { Log } from '@llama-orch/daemon-support';
import type { EndDispatchEvent, Penalty } from '../upstream/dispatch-attempt.js';
import type { TaskEvents } from './task-events.js';
import type { TaskJournal } from './task-journal.js';
import type { TaskRecord } from './task-record.js';

const ENGINE = 'llamacpp';

export type CancelReason = 'client' | 'disconnect';

/** No exemplar: an untraced task's observation (the shared empty object: nothing allocated per task). */
const NO_EXEMPLAR: Record<string, string> = Object.freeze({}) as Record<string, string>;

/** A traced task's observations carry its trace id (OpenMetrics exemplars link a histogram bucket to a trace). */
function exemplarOf(task: TaskRecord): Record<string, string> {
  return task.trace === undefined ? NO_EXEMPLAR : { trace_id: task.trace.spanContext.traceId };
}

/**
 * Turns task events into metrics, predictor samples, narration log lines and {@link TaskEvents}
 * for subscribers, and nothing else: it never changes a task. Every line goes through the task's
 * own logger, so it carries the admitting request's `correlation_id` and the `task_id`.
 */
export class TaskObserver {
  readonly #metrics: OrchdMetrics;
  readonly #predictor: Predictor;
  readonly #events: TaskEvents;
  readonly #journal: TaskJournal | undefined;

  constructor(metrics: OrchdMetrics, predictor: Predictor, events: TaskEvents, journal?: TaskJournal) {
    this.#metrics = metrics;
    this.#predictor = predictor;
    this.#events = events;
    this.#journal = journal;
  }

  /** An admission check refused the task (before it had a record). */
  refused(code: ErrorCode): void {
    this.#metrics.tasksRejected.inc({ engine: ENGINE, reason: code });
  }

  /** The queue was full (before the task had a record). */
  queueFull(log: Log, taskId: string, policy: QueuePolicy, depth: number, capacity: number): void {
    const code = policy === 'reject' ? 'ADMISSION_REJECT' : 'QUEUE_FULL_DROP_LRU';
    this.#metrics.backpressureEvents.inc({ engine: ENGINE, policy });
    this.#metrics.tasksRejected.inc({ engine: ENGINE, reason: code });
    log.warn(
      {
        task_id: taskId,
        policy,
        queue_depth: depth,
        human: `Refused task ${taskId}: admission queue full (${depth}/${capacity}, policy ${policy})`,
      },
      'admission rejected',
    );
  }

  admitted(task: TaskRecord, position: number): void {
    const r = task.request;
    this.#metrics.tasksEnqueued.inc({ engine: ENGINE, priority: r.priority });
    task.log.info(
      {
        queue_position: position,
        predicted_start_ms: task.predictedStartMs,
        model_ref: r.model_ref,
        priority: r.priority,
        human: `Accepted task ${task.id} for '${r.model_ref}'; queued at position ${position} (ETA ${task.predictedStartMs} ms)`,
      },
      'task admitted',
    );
    this.#journal?.changed(task);
    task.trace?.queued(position);
    if (this.#events.observed) this.#events.emit({ type: 'admitted', taskId: task.id });
  }

  /** `victim` left the full queue (drop-lru) to make room for `by`. */
  evicted(victim: TaskRecord, by: TaskRecord): void {
    this.#metrics.backpressureEvents.inc({ engine: ENGINE, policy: 'drop-lru' });
    this.#metrics.tasksRejected.inc({ engine: ENGINE, reason: 'QUEUE_FULL_DROP_LRU' });
    victim.log.warn(
      { evicted_by: by.id, human: `Evicted queued batch task ${victim.id} to admit ${by.id} (queue full, drop-lru)` },
      'task evicted',
    );
  }

  /** The task found no free slot, for the first time. */
  waiting(task: TaskRecord): void {
    this.#metrics.placementDecisions.inc({
      outcome: 'no_capacity',
      pinned: String(task.request.placement?.mode === 'pin'),
      fallback: 'false',
    });
  }

  unplaceable(task: TaskRecord, code: ErrorCode, message: string): void {
    task.log.warn({ code, human: `Cannot place task ${task.id}: ${message}` }, 'placement failed');
  }

  /** A slot of `view` was leased for the task and its dispatch starts. */
  placed(task: TaskRecord, view: PoolView, reason: PlacementReason, now: number): void {
    this.#metrics.placementDecisions.inc({
      outcome: 'assigned',
      pinned: String(reason === 'pinned'),
      fallback: String(reason === 'fallback'),
    });
    this.#metrics.placementReasons.inc({ reason });
    const affinity = task.ticket.affinity;
    if (affinity !== undefined) {
      const kept = affinity.node_id === view.node_id && affinity.pool_id === view.pool_id;
      this.#metrics.sessionAffinity.inc({ outcome: kept ? 'kept' : 'moved' });
    }
    task.log.info(
      {
        pool_id: view.pool_id,
        node_id: view.node_id,
        reason,
        // cache-aware: blocks of the prompt the pool's cache was expected to hold (spec 68)
        prefix_blocks: task.ticket.prefix?.blocks,
        attempt: task.failedAttempts + 1,
        waited_ms: now - task.admittedAt,
        human: `Placed task ${task.id} on pool ${view.pool_id} of node ${view.node_id} (${reason}; ${view.free} free slot(s) before this one)`,
      },
      'task placed',
    );
    this.#journal?.changed(task);
    task.trace?.placed(view.node_id, view.pool_id, reason, now - task.admittedAt);
    if (this.#events.observed) this.#events.emit({ type: 'dispatched', taskId: task.id });
  }

  /** A node accepted a dispatch of the task; `first` for the first one the task got. */
  accepted(task: TaskRecord, view: PoolView, first: boolean): void {
    if (first) {
      this.#metrics.tasksStarted.inc({
        engine: ENGINE,
        engine_version: view.snapshot.engine_version,
        pool_id: view.pool_id,
        priority: task.request.priority,
      });
    }
    task.log.debug({ pool_id: view.pool_id, node_id: view.node_id }, 'dispatch accepted');
  }

  firstToken(task: TaskRecord, view: PoolView, now: number): void {
    const sinceAdmission = now - task.admittedAt;
    this.#metrics.firstTokenSeconds.observe({
      labels: {
        engine: ENGINE,
        engine_version: view.snapshot.engine_version,
        pool_id: view.pool_id,
        priority: task.request.priority,
      },
      value: sinceAdmission / 1000,
      exemplarLabels: exemplarOf(task),
    });
    task.trace?.firstToken(sinceAdmission);
    this.#predictor.observeFirstToken(view.node_id, view.pool_id, now - (task.dispatchedAt ?? now));
    task.log.info(
      {
        pool_id: view.pool_id,
        node_id: view.node_id,
        first_token_ms: sinceAdmission,
        human: `Streaming task ${task.id} from pool ${view.pool_id}; first token after ${sinceAdmission} ms`,
      },
      'stream started',
    );
    if (this.#events.observed)
      this.#events.emit({ type: 'first-token', taskId: task.id, at: now, ttftMs: Math.max(0, sinceAdmission) });
  }

  /** The node ended the task. */
  finished(task: TaskRecord, view: PoolView, ev: EndDispatchEvent): void {
    this.#predictor.observeEnd(view.node_id, view.pool_id, ev.tokens_out, ev.decode_ms);
    this.#metrics.decodeSeconds.observe({
      labels: {
        engine: ENGINE,
        engine_version: ev.engine_version,
        pool_id: ev.pool_id,
        priority: task.request.priority,
      },
      value: ev.decode_ms / 1000,
      exemplarLabels: exemplarOf(task),
    });
    task.log.info(
      {
        pool_id: ev.pool_id,
        node_id: ev.node_id,
        tokens_out: ev.tokens_out,
        decode_ms: ev.decode_ms,
        stop_type: ev.stop_type,
        human: `Task ${task.id} finished on pool ${ev.pool_id}: ${ev.tokens_out} token(s) in ${Math.round(ev.decode_ms)} ms (${ev.stop_type})`,
      },
      'task ended',
    );
  }

  /** The attempt on `view` failed for good. */
  failedOn(task: TaskRecord, view: PoolView, code: ErrorCode, message: string): void {
    task.trace?.attemptFailed(code, message);
    task.log.warn(
      {
        code,
        pool_id: view.pool_id,
        node_id: view.node_id,
        tokens_out: task.tokens,
        human: `Task ${task.id} failed on pool ${view.pool_id} after ${task.tokens} token(s): ${message}`,
      },
      'task failed',
    );
  }

  /** Every attempt the task may make failed before its first token. */
  gaveUp(task: TaskRecord, cause: ErrorCode, attempts: number): void {
    task.log.warn(
      {
        code: cause,
        attempts,
        human: `Task ${task.id} failed on ${attempts} pool(s) before its first token; giving up`,
      },
      'task failed',
    );
  }

  /** The task goes back to the head of the queue after an attempt on `view` (`penalty` says why). */
  requeued(task: TaskRecord, view: PoolView, code: ErrorCode, message: string, penalty: Penalty): void {
    task.trace?.attemptFailed(code, message);
    const saturated = penalty === 'saturated' || penalty === 'leased';
    if (!saturated) this.#metrics.replacements.inc({ reason: code });
    task.log.info(
      {
        pool_id: view.pool_id,
        node_id: view.node_id,
        code,
        saturated,
        human: saturated
          ? `Pool ${view.pool_id} had no free slot for task ${task.id}; back to the head of the queue`
          : `Pool ${view.pool_id} on node ${view.node_id} failed task ${task.id} before its first token (${message}); re-placing`,
      },
      'task re-queued',
    );
  }

  canceled(task: TaskRecord, reason: CancelReason): void {
    this.#metrics.tasksCanceled.inc({ engine: ENGINE, pool_id: task.placement?.pool_id ?? '', reason });
    task.log.info(
      {
        reason,
        tokens_out: task.tokens,
        human: `Task ${task.id} canceled (${reason === 'client' ? 'client request' : 'client disconnected'}) after ${task.tokens} token(s)`,
      },
      'task canceled',
    );
  }

  expiredInQueue(task: TaskRecord, now: number): void {
    task.log.warn(
      {
        waited_ms: now - task.admittedAt,
        human: `Task ${task.id} expired in the queue after ${now - task.admittedAt} ms (deadline ${task.request.deadline_ms} ms)`,
      },
      'deadline expired',
    );
  }

  timedOut(task: TaskRecord): void {
    task.log.warn(
      {
        tokens_out: task.tokens,
        human: `Task ${task.id} ran past its deadline of ${task.request.deadline_ms} ms; stopped`,
      },
      'deadline expired',
    );
  }

  /** A bug: the dispatch code threw. */
  crashed(task: TaskRecord, err: unknown): void {
    task.log.error({ err }, 'dispatch crashed');
  }

  /** A task of a replica that died is this one's now (its record names this replica from here on). */
  adopted(task: TaskRecord): void {
    this.#journal?.changed(task);
  }

  /** The task's terminal frame was written at `now`. */
  ended(task: TaskRecord, frame: SseFrame, now: number): void {
    this.#journal?.ended(task, frame, now);
    task.trace?.ended(frame);
    if (frame.event === 'end') {
      const end: EndEvent = frame.data;
      // How long the task held its slot, for the predictor's throughput (a canceled one says nothing about the next task).
      if (end.canceled !== true && task.placement !== undefined && task.dispatchedAt !== undefined) {
        this.#predictor.observeSlotTime(task.placement.node_id, task.placement.pool_id, now - task.dispatchedAt);
      }
      this.#metrics.tokensOut.inc(
        {
          engine: ENGINE,
          engine_version: end.engine_version ?? '',
          pool_id: end.pool_id ?? task.placement?.pool_id ?? '',
        },
        end.tokens_out,
      );
      if (task.clientKey !== undefined) this.#metrics.clientTokensOut.inc({ key: task.clientKey }, end.tokens_out);
    } else if (frame.event === 'error') {
      this.#metrics.tasksFailed.inc({ engine: ENGINE, code: frame.data.code });
    }
    if (!this.#events.observed) return;
    const outcome =
      frame.event === 'error' ? 'error' : frame.event === 'end' && frame.data.canceled === true ? 'canceled' : 'ok';
    this.#events.emit({
      type: 'ended',
      task: {
        taskId: task.id,
        correlationId: task.correlationId,
        model: task.modelName,
        priority: task.request.priority,
        nodeId: task.placement?.node_id,
        poolId: task.placement?.pool_id,
        // The engine's count when it ended the task (what usage and llorch_tokens_out_total say): it
        // can exceed the token frames when the engine merged pieces into one frame.
        tokensOut: frame.event === 'end' ? frame.data.tokens_out : task.tokens,
        ttftMs: task.firstTokenAt === undefined ? undefined : Math.max(0, task.firstTokenAt - task.admittedAt),
        admittedAt: task.admittedAt,
        endedAt: now,
        outcome,
        code: frame.event === 'error' ? frame.data.code : undefined,
      },
    });
  }
}
