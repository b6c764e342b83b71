import { randomUUID } from 'node:crypto';

/**
 * Every route of both services (contracts/openapi/*.yaml), as test data: the suite talks HTTP
 * only. `{id}` is filled per case. `validBody` builds a body the route accepts, which the fuzzer
 * mutates; routes whose valid body would change the cluster (drain, reload) are only sent valid
 * bodies against ids that name no real pool.
 */
export interface RouteSpec {
  service: 'orchestratord' | 'pool-managerd';
  method: 'GET' | 'POST' | 'DELETE';
  path: string;
  /** Served without a token. */
  public: boolean;
  /** A body the route accepts; absent for routes without a body. */
  validBody?: (ctx: RouteContext) => Record<string, unknown>;
  /** The route acts on the real cluster when given a valid body and the real id. */
  mutatesRealPool?: boolean;
}

/** Real ids the valid bodies refer to. */
export interface RouteContext {
  model: string;
  /** A pool id that exists (the fuzz cluster's pool). */
  realPoolId: string;
  nodeId: string;
}

const snapshot = (poolId: string) => ({
  pool_id: poolId,
  state: 'ready',
  ready: true,
  draining: false,
  slots_total: 1,
  slots_free: 1,
  models: ['fuzz-model'],
  engine_version: 'fuzz',
  ctx: 512,
  deterministic: false,
  decode_tps: 0,
});

export const ROUTES: readonly RouteSpec[] = [
  // orchestratord: data plane
  {
    service: 'orchestratord',
    method: 'POST',
    path: '/v2/tasks',
    public: false,
    validBody: (c) => ({
      task_id: randomUUID(),
      session_id: randomUUID(),
      workload: 'completion',
      model_ref: c.model,
      engine: 'llamacpp',
      ctx: 0,
      priority: 'batch',
      prompt: 'fuzz',
      max_tokens: 2,
      deadline_ms: 30_000,
    }),
  },
  { service: 'orchestratord', method: 'GET', path: '/v2/tasks/{id}/events', public: false },
  { service: 'orchestratord', method: 'POST', path: '/v2/tasks/{id}/cancel', public: false },
  { service: 'orchestratord', method: 'GET', path: '/v2/sessions/{id}', public: false },
  { service: 'orchestratord', method: 'DELETE', path: '/v2/sessions/{id}', public: false },
  // orchestratord: node API
  {
    service: 'orchestratord',
    method: 'POST',
    path: '/v2/nodes/register',
    public: false,
    validBody: () => ({
      node_id: `fuzz-node-${randomUUID().slice(0, 8)}`,
      machine_id: 'fuzz',
      address: 'http://127.0.0.1:9',
      pools: [snapshot('fuzz-pool')],
      capabilities: { gpus: [], cpu_cores: 1, ram_total_bytes: 1 },
      version: '0.0.0',
    }),
  },
  {
    service: 'orchestratord',
    method: 'POST',
    path: '/v2/nodes/{id}/heartbeat',
    public: false,
    validBody: () => ({ timestamp: new Date().toISOString(), pools: [snapshot('fuzz-pool')] }),
  },
  { service: 'orchestratord', method: 'DELETE', path: '/v2/nodes/{id}', public: false },
  { service: 'orchestratord', method: 'GET', path: '/v2/nodes', public: false },
  // orchestratord: control plane
  { service: 'orchestratord', method: 'GET', path: '/v2/meta/capabilities', public: false },
  { service: 'orchestratord', method: 'GET', path: '/v2/pools', public: false },
  { service: 'orchestratord', method: 'GET', path: '/v2/pools/{id}/health', public: false },
  {
    service: 'orchestratord',
    method: 'POST',
    path: '/v2/pools/{id}/drain',
    public: false,
    validBody: () => ({ deadline_ms: 1000 }),
    mutatesRealPool: true,
  },
  {
    service: 'orchestratord',
    method: 'POST',
    path: '/v2/pools/{id}/reload',
    public: false,
    validBody: () => ({ new_model_ref: 'synthetic:llama?seed=7' }),
    mutatesRealPool: true,
  },
  { service: 'orchestratord', method: 'GET', path: '/v2/catalog/models', public: false },
  {
    service: 'orchestratord',
    method: 'POST',
    path: '/v2/catalog/models',
    public: false,
    validBody: () => ({ ref: 'synthetic:llama?seed=3' }),
  },
  { service: 'orchestratord', method: 'DELETE', path: '/v2/catalog/models/{id}', public: false },
  { service: 'orchestratord', method: 'GET', path: '/v2/catalog/availability', public: false },
  { service: 'orchestratord', method: 'GET', path: '/metrics', public: true },
  // pool-managerd
  { service: 'pool-managerd', method: 'GET', path: '/health', public: false },
  { service: 'pool-managerd', method: 'GET', path: '/v2/pools', public: false },
  { service: 'pool-managerd', method: 'GET', path: '/v2/pools/{id}', public: false },
  {
    service: 'pool-managerd',
    method: 'POST',
    path: '/v2/pools/{id}/drain',
    public: false,
    validBody: () => ({ deadline_ms: 1000 }),
    mutatesRealPool: true,
  },
  {
    service: 'pool-managerd',
    method: 'POST',
    path: '/v2/pools/{id}/reload',
    public: false,
    validBody: () => ({ new_model_ref: 'synthetic:llama?seed=7' }),
    mutatesRealPool: true,
  },
  {
    service: 'pool-managerd',
    method: 'POST',
    path: '/v2/pools/{id}/completions',
    public: false,
    validBody: () => ({ task_id: randomUUID(), prompt: 'fuzz', max_tokens: 2 }),
  },
  { service: 'pool-managerd', method: 'GET', path: '/metrics', public: true },
];

/** Fills `{id}` (URL-encoded). */
export function fillPath(path: string, id: string): string {
  return path.replace('{id}', encodeURIComponent(id));
}
