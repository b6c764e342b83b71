import type { Tracer } from '@opentelemetry/api';
import type { ErrorCode, MetricsEvent, SseFrame } from '@llama-orch/contracts';
import type { AdmissionQueue } from '../../admission/admission-queue.js';
import type { NodeRegistry } from '../../registry/node-registry.js';
import type { Lease, PoolView } from '../../registry/pool-view.js';
import type { PoolClient } from '../../upstream/pool-client.js';
import type { Adoption, SharedPlacement } from './cluster-tasks.js';
import { newTaskRecord, type TaskRecord } from '../task-record.js';
import { TaskTrace } from '../task-trace.js';

/** Frames a taken-over queued task gets past the least its first replica may have sent: room for position changes. */
const QUEUED_PRELUDE_MARGIN = 64;

/** One shared padding frame: a frame log keeps references, and these never change. */
const PADDING: SseFrame = { event: 'metrics', data: { queue_depth: 0, on_time_probability: 1 } satisfies MetricsEvent };

/**
 * The local record of a task taken over from a replica that died, with a frame log whose ids go on
 * where the first replica's left off, so a client resuming with `Last-Event-ID` gets no frame twice
 * and misses none of its tokens:
 * - running: `started`, then padding up to the dispatch's `frame_base`; the re-attached attempt
 *   replays the node's tokens from the first, which then get the ids they had;
 * - queued: `started`, then padding past what the first replica can have sent while it waited
 *   (one frame per metrics period and per position change, bounded by twice the periods plus a
 *   margin): the frames after it are new to the client.
 * Admission time, deadline, correlation id and key are the first replica's.
 */
export function adoptedTask(a: Adoption, metricsIntervalMs: number, now: number, tracer?: Tracer): TaskRecord {
  const r = a.record;
  const task = newTaskRecord({
    request: r.request,
    modelName: r.model_name,
    log: a.log,
    correlationId: r.correlation_id ?? a.id,
    clientKey: r.client_key,
    now: r.admitted_at,
    predictedStartMs: 0,
    phase: 'queued',
    delivery: r.delivery,
    door: r.door,
    trace:
      tracer &&
      TaskTrace.adopted(
        tracer,
        r.traceparent,
        { id: a.id, request: r.request, modelName: r.model_name ?? r.request.model_ref, door: r.door ?? 'v2' },
        a.previousOwner,
      ),
    life: a.life,
  });
  task.takenOver = true;
  task.stream.append({ event: 'started', data: { queue_position: 0, predicted_start_ms: 0 } });
  const waited = Math.max(0, now - r.admitted_at);
  const prelude =
    a.placement?.frame_base ?? 1 + 2 * Math.ceil(waited / Math.max(1, metricsIntervalMs)) + QUEUED_PRELUDE_MARGIN;
  while (task.stream.length < prelude) task.stream.append(PADDING);
  task.lastMetricsAt = now;
  return task;
}

export interface AdoptInto {
  readonly queue: AdmissionQueue<TaskRecord>;
  readonly registry: NodeRegistry;
  fail(code: ErrorCode, message: string): void;
  /** Re-attach to the dispatch running on `view`, under `lease`. */
  resume(view: PoolView, lease: Lease): void;
}

/**
 * Where an adopted task goes: a queued one back in this replica's line by admission time (its
 * cluster queue entry never moved); a running one re-attached to its dispatch on the node, under
 * a local lease of its slot (it is busy there); one whose pool is gone fails (retriable).
 */
export function adoptInto(task: TaskRecord, placement: SharedPlacement | undefined, to: AdoptInto): void {
  if (placement === undefined)
    return to.queue.reinsert(task.id, task.request.priority, task, task.deadlineAt, (t) => t.admittedAt);
  const view = to.registry.poolsWithId(placement.pool_id).find((v) => v.node_id === placement.node_id);
  if (view === undefined)
    return to.fail('WORKER_RESET', `the task's pool ${placement.pool_id} on node ${placement.node_id} is gone`);
  to.resume(view, to.registry.lease(view.node_id, view.pool_id));
}

/** A pool client whose dispatch re-attaches to the task's running dispatch (all its tokens from the first) instead of starting one. */
export function reattaching(client: PoolClient, taskId: string): Pick<PoolClient, 'dispatch'> {
  return {
    dispatch: (node, poolId, _body, controller, correlationId, trace) =>
      client.reattach(node, poolId, taskId, -1, controller, correlationId, trace),
  };
}

/**
 * A re-attachable dispatch (`reattach_ms`) that this replica ends before it finished (cancel,
 * deadline, shutdown) would keep generating for the window: the node is told to cancel it. Not
 * awaited; a node that cannot be reached cancels it when the window passes.
 */
export function cancelHeldDispatch(registry: NodeRegistry, client: PoolClient, task: TaskRecord): void {
  const p = task.placement;
  if (p === undefined || task.delivery !== 'events' || task.request.call !== undefined) return;
  const view = registry.poolsWithId(p.pool_id).find((v) => v.node_id === p.node_id);
  if (view === undefined) return;
  client.cancelDispatch(view.dispatch, p.pool_id, task.id, task.correlationId).catch((err: unknown) => {
    task.log.debug({ err }, 'cancel of the held dispatch did not reach the node; the window ends it');
  });
}
