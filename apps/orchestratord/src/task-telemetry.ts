import type { MetricsEvent, TaskRequest } from '@llama-orch/contracts';
import { modelAvailability, provisioningProgress } from './model-availability.js';
import type { PoolView } from './node-registry.js';
import { isEligible, type PlacementRequest } from './placement.js';
import { onTimeProbability, type Prediction, type Predictor, type PredictorPool } from './predictor.js';
import type { TaskRecord } from './task.js';

/** Prediction for a task from the pools that list its model (eligible ones when any). */
export function predictTask(predictor: Predictor, request: TaskRequest, ahead: number, listed: readonly PoolView[]): Prediction {
  const req: PlacementRequest = { model_ref: request.model_ref, ctx: request.ctx, determinism: request.determinism, placement: request.placement };
  const eligible = listed.filter((p) => isEligible(req, p));
  const pools: PredictorPool[] = (eligible.length > 0 ? eligible : listed).map((p) => ({
    node_id: p.node_id,
    pool_id: p.pool_id,
    slots_total: p.slots_total,
    free: p.node_state === 'online' && p.ready && !p.draining ? p.free : 0,
    decode_tps: p.snapshot.decode_tps,
    serving: p.state === 'ready',
    provisioningEtaMs: p.provisioningEtaMs,
  }));
  return predictor.predict(request.expected_tokens ?? request.max_tokens, ahead, pools);
}

export interface MetricsFrameInput {
  readonly task: TaskRecord;
  readonly views: readonly PoolView[];
  readonly predictor: Predictor;
  /** Tasks queued cluster-wide. */
  readonly depth: number;
  /** Position in the queue; undefined once dispatched. */
  readonly position: number | undefined;
  /** Tasks for the same model ahead of it. */
  readonly ahead: number;
  readonly now: number;
}

/**
 * The plain and verbose payloads of one `metrics` frame for a waiting task, and the phase it is
 * in (`preparing` while its model is only being provisioned).
 */
export function metricsFrame(input: MetricsFrameInput): { data: MetricsEvent; verbose: MetricsEvent; phase: TaskRecord['phase'] } {
  const { task, position } = input;
  const avail = modelAvailability(input.views, task.request.model_ref);
  const listed = [...avail.ready, ...avail.provisioning];
  const prediction = position === undefined ? undefined : predictTask(input.predictor, task.request, input.ahead, listed);
  const waitMs = prediction?.startMs ?? 0;
  const needMs = waitMs + (prediction?.serviceMs ?? 0);
  const data: MetricsEvent = { queue_depth: input.depth, on_time_probability: onTimeProbability(task.deadlineAt - input.now, needMs) };
  if (position !== undefined) data.queue_position = position;
  const preparing = avail.ready.length === 0 && avail.provisioning.length > 0;
  const phase: TaskRecord['phase'] = task.state === 'queued' ? (preparing ? 'preparing' : 'queued') : task.phase;
  let human: string;
  if (task.state === 'running' && task.placement !== undefined) {
    human = `Dispatched to pool ${task.placement.pool_id} on node ${task.placement.node_id}; waiting for the first token`;
  } else if (preparing) {
    const pct = Math.round((provisioningProgress(avail.provisioning) ?? 0) * 100);
    human = `Waiting for '${task.request.model_ref}' to be provisioned (${pct}% done); position ${position ?? 0} in the queue`;
  } else {
    human = `Queued at position ${position ?? 0} of ${input.depth}; predicted start in about ${Math.round(waitMs / 100) / 10} s`;
  }
  // Object.assign: `{ ...data, phase, human }` would get a new hidden class per frame in V8.
  const verbose: MetricsEvent = Object.assign({}, data, { phase, human });
  const prep = preparing ? provisioningProgress(avail.provisioning) : undefined;
  if (prep !== undefined) verbose.prep = prep;
  return { data, verbose, phase };
}
