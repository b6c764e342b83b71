import type { TaskRequest } from '@llama-orch/contracts';
import type { PoolView } from '../registry/pool-view.js';
import { isEligible, type PlacementRequest } from '../scheduling/placement.js';
import type { Prediction, Predictor, PredictorPool } from './predictor.js';

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
