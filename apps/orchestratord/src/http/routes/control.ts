import {
  CapabilitiesSchema,
  ClusterPoolListSchema,
  DrainRequestSchema,
  PoolHealthSchema,
  ReloadRequestSchema,
  TASK_LIMITS,
} from '@llama-orch/contracts';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { NotFoundError, PoolUnavailableError } from '../../errors.js';
import { toClusterPool } from '../../registry/cluster-pool.js';
import type { PoolView } from '../../registry/pool-view.js';
import { UpstreamConnectError, UpstreamStreamError } from '../../upstream/upstream-errors.js';
import type { ServicesOptions } from '../app-services.js';

const PoolParams = z.object({ id: z.string() });
export const API_VERSION = '2.0.0';

/** Discovery and pool control: capabilities, pools, health, drain/reload forwarded to the owning node. */
export const controlRoutes: FastifyPluginAsyncZod<ServicesOptions> = async (app, { services }) => {
  const { registry, config, poolClient } = services;

  app.get('/v2/meta/capabilities', { schema: { response: { 200: CapabilitiesSchema } } }, async () => {
    const live = registry.pools().filter((v) => v.node_state === 'online' && v.state === 'ready');
    const ctxs = live.map((v) => v.ctx).filter((c) => c > 0);
    const versions = [...new Set(live.map((v) => v.snapshot.engine_version))].sort();
    return {
      api_version: API_VERSION,
      ctx_max: ctxs.length > 0 ? Math.max(...ctxs) : config.ctx_max,
      max_tokens_max: TASK_LIMITS.maxTokensMax,
      engines: [{ engine: 'llamacpp', versions }],
      workloads: ['completion'],
      models: [...new Set(live.flatMap((v) => v.models))].sort(),
      admission: { capacity: config.admission_capacity, policy: config.admission_policy },
    };
  });

  app.get('/v2/pools', { schema: { response: { 200: ClusterPoolListSchema } } }, async () => ({
    pools: registry.pools().map(toClusterPool),
  }));

  const owner = (poolId: string): PoolView => {
    const view = registry.poolsById(poolId)[0];
    if (view === undefined) throw new NotFoundError(`pool '${poolId}' is not known to the cluster`);
    return view;
  };

  app.get(
    '/v2/pools/:id/health',
    { schema: { params: PoolParams, response: { 200: PoolHealthSchema } } },
    async (req) => {
      const v = owner(req.params.id);
      const online = v.node_state === 'online';
      return {
        pool_id: v.pool_id,
        live: online && (v.state === 'ready' || v.state === 'draining' || v.state === 'starting'),
        ready: online && v.state === 'ready' && v.ready && !v.draining,
        draining: v.draining,
        state: v.state,
        ...(v.snapshot.last_error !== undefined ? { last_error: v.snapshot.last_error } : {}),
      };
    },
  );

  const forward = async (
    poolId: string,
    op: 'drain' | 'reload',
    body: unknown,
  ): Promise<{ status: number; body: unknown }> => {
    const v = owner(poolId);
    try {
      const res = await poolClient.operation(v.address, v.pool_id, op, body);
      if (op === 'drain' && res.status >= 200 && res.status < 300) registry.markDraining(v.node_id, v.pool_id);
      return res;
    } catch (err) {
      if (err instanceof UpstreamConnectError || err instanceof UpstreamStreamError) {
        throw new PoolUnavailableError(`node ${v.node_id} did not accept ${op} for pool ${v.pool_id}: ${err.message}`, {
          cause: err,
        });
      }
      throw err;
    }
  };

  app.post('/v2/pools/:id/drain', { schema: { params: PoolParams, body: DrainRequestSchema } }, async (req, reply) => {
    const res = await forward(req.params.id, 'drain', req.body);
    req.log.info(
      {
        pool_id: req.params.id,
        status: res.status,
        human: `Drain of pool ${req.params.id} forwarded; node answered ${res.status}`,
      },
      'pool drain',
    );
    return reply.code(res.status).send(res.body);
  });

  app.post(
    '/v2/pools/:id/reload',
    { schema: { params: PoolParams, body: ReloadRequestSchema } },
    async (req, reply) => {
      const res = await forward(req.params.id, 'reload', req.body);
      req.log.info(
        {
          pool_id: req.params.id,
          status: res.status,
          new_model_ref: req.body.new_model_ref,
          human: `Reload of pool ${req.params.id} to '${req.body.new_model_ref}' forwarded; node answered ${res.status}`,
        },
        'pool reload',
      );
      return reply.code(res.status).send(res.body);
    },
  );
};
