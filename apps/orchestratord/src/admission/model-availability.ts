import type { PreparationStep } from '@llama-orch/contracts';
import { servesModel, type PoolView } from '../registry/pool-view.js';

/** Pools that list a model, split by whether they serve it now or are still preparing it. */
export interface ModelAvailability {
  /** Node not offline, pool `ready`. */
  readonly ready: readonly PoolView[];
  /** Node not offline, pool `provisioning` or `starting`. */
  readonly provisioning: readonly PoolView[];
}

/**
 * `views` may be every pool or only the model's (`NodeRegistry.poolsForModel`, much cheaper: the
 * model check compares strings per pool); the result is the same.
 */
export function modelAvailability(views: readonly PoolView[], model: string): ModelAvailability {
  const ready: PoolView[] = [];
  const provisioning: PoolView[] = [];
  for (const v of views) {
    if (v.node_state === 'offline' || !servesModel(v, model)) continue;
    if (v.state === 'ready') ready.push(v);
    else if (v.state === 'provisioning' || v.state === 'starting') provisioning.push(v);
  }
  return { ready, provisioning };
}

/** Mean provisioning progress (engine build + model fetch, 0..1) of the most advanced pool. */
export function provisioningProgress(pools: readonly PoolView[]): number | undefined {
  let best: number | undefined;
  for (const p of pools) {
    const prog = p.snapshot.progress;
    const value = p.state === 'starting' ? 1 : prog === undefined ? 0 : (prog.engine + prog.model) / 2;
    best = best === undefined ? value : Math.max(best, value);
  }
  return best === undefined ? undefined : Math.round(best * 1000) / 1000;
}

function stepStatus(fraction: number): PreparationStep['status'] {
  if (fraction >= 1) return 'done';
  return fraction > 0 ? 'running' : 'pending';
}

/** Steps a task waits on while its model is being prepared, with live progress from heartbeats. */
export function preparationSteps(pools: readonly PoolView[]): PreparationStep[] {
  const steps: PreparationStep[] = [];
  for (const p of pools) {
    const prog = p.snapshot.progress;
    const starting = p.state === 'starting';
    const engine = starting ? 1 : (prog?.engine ?? 0);
    const model = starting ? 1 : (prog?.model ?? 0);
    const eta = p.provisioningEtaMs;
    steps.push({
      id: `${p.pool_id}:engine_provision`,
      kind: 'engine_provision',
      description: `Build or locate llama-server for pool ${p.pool_id} on node ${p.node_id}`,
      status: stepStatus(engine),
      ...(eta !== undefined && engine < 1 ? { estimated_ms: eta } : {}),
    });
    const fetch: PreparationStep = {
      id: `${p.pool_id}:model_fetch`,
      kind: 'model_fetch',
      description: `Fetch and verify the model for pool ${p.pool_id}`,
      status: stepStatus(model),
    };
    if (prog?.model_bytes_total !== undefined) fetch.bytes_total = prog.model_bytes_total;
    if (prog?.model_bytes_done !== undefined) fetch.bytes_done = prog.model_bytes_done;
    if (eta !== undefined && model < 1) fetch.estimated_ms = eta;
    steps.push(fetch);
    steps.push({
      id: `${p.pool_id}:pool_warmup`,
      kind: 'pool_warmup',
      description: `Start llama-server and wait for it to be healthy on pool ${p.pool_id}`,
      status: starting ? 'running' : 'pending',
    });
  }
  return steps;
}
