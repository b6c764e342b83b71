import type { TaskRequest } from '@llama-orch/contracts';
import type { PoolView } from '../registry/pool-view.js';
import { isEligible, type PlacementRequest } from '../scheduling/placement.js';
import { modelAvailability } from './model-availability.js';
import type { Prediction, Predictor, PredictorPool } from './predictor.js';

function toPredictorPool(p: PoolView): PredictorPool {
  return {
    node_id: p.node_id,
    pool_id: p.pool_id,
    slots_total: p.slots_total,
    free: p.node_state === 'online' && p.ready && !p.draining ? p.free : 0,
    decode_tps: p.snapshot.decode_tps,
    serving: p.state === 'ready',
    provisioningEtaMs: p.provisioningEtaMs,
  };
}

/** Prediction for a task from the pools that list its model (eligible ones when any). */
export function predictTask(
  predictor: Predictor,
  request: TaskRequest,
  ahead: number,
  listed: readonly PoolView[],
): Prediction {
  const req: PlacementRequest = {
    model_ref: request.model_ref,
    ctx: request.ctx,
    determinism: request.determinism,
    placement: request.placement,
  };
  const eligible = listed.filter((p) => isEligible(req, p));
  const pools = (eligible.length > 0 ? eligible : listed).map(toPredictorPool);
  return predictor.predict({ maxTokens: request.max_tokens, expectedTokens: request.expected_tokens, ahead, pools });
}

export interface ClusterWaitInput {
  readonly predictor: Predictor;
  /** Every pool of the cluster. */
  readonly pools: readonly PoolView[];
  /** Pools that serve a model (`NodeRegistry.poolsForModel`). */
  readonly poolsForModel: (model: string) => readonly PoolView[];
  /** Tasks queued that a new task for `model` would wait behind. */
  readonly ahead: (model: string) => number;
  /** Token cap of the new task (its own size counts only where no task of a pool ended yet). */
  readonly tokens: number;
}

/**
 * Predicted start of a new task (no placement constraints) for the model that would wait longest:
 * one figure for the whole cluster, as an operator's overview shows it. Models are the refs of
 * pools on nodes not offline; 0 when there are none.
 */
export function predictClusterWait(input: ClusterWaitInput): number {
  const models = new Set<string>();
  for (const p of input.pools) if (p.node_state !== 'offline') for (const m of p.models) models.add(m);
  let longest = 0;
  for (const model of models) {
    const avail = modelAvailability(input.poolsForModel(model), model);
    const listed = [...avail.ready, ...avail.provisioning];
    if (listed.length === 0) continue;
    longest = Math.max(
      longest,
      input.predictor.predict({
        maxTokens: input.tokens,
        ahead: input.ahead(model),
        pools: listed.map(toPredictorPool),
      }).startMs,
    );
  }
  return longest;
}
