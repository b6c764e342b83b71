import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import {
  DrainRequestSchema,
  ErrorEnvelopeSchema,
  ManagerHealthSchema,
  PoolIdSchema,
  PoolLoadRequestSchema,
  PoolOperationResponseSchema,
  PoolStatusListSchema,
  PoolStatusSchema,
  PoolUnloadQuerySchema,
  ReloadRequestSchema,
} from '@llama-orch/contracts';
import type { PoolManager } from '../pools/pool-manager.js';

const PoolParams = z.strictObject({ id: PoolIdSchema });

/** Health, pool status, drain and reload routes; loads on request and their unload. */
export const poolRoutes: FastifyPluginAsyncZod<{ manager: PoolManager }> = async (app, { manager }) => {
  const log = app.log;
  app.get('/health', { schema: { response: { 200: ManagerHealthSchema } } }, async () => {
    const pools: Record<string, z.infer<typeof PoolStatusSchema>['state']> = {};
    for (const s of manager.pools.statuses()) pools[s.pool_id] = s.state;
    return { status: 'ok' as const, node_id: manager.nodeId, pools };
  });

  app.get('/v2/pools', { schema: { response: { 200: PoolStatusListSchema } } }, async () => ({
    pools: manager.pools.statuses(),
  }));

  app.get(
    '/v2/pools/:id',
    { schema: { params: PoolParams, response: { 200: PoolStatusSchema, 404: ErrorEnvelopeSchema } } },
    async (request) => manager.pools.status(request.params.id),
  );

  app.post(
    '/v2/pools',
    { schema: { body: PoolLoadRequestSchema, response: { 202: PoolStatusSchema } } },
    async (request, reply) => reply.code(202).send(await manager.load(request.body)),
  );

  app.delete(
    '/v2/pools/:id',
    { schema: { params: PoolParams, querystring: PoolUnloadQuerySchema, response: { 202: PoolStatusSchema } } },
    async (request, reply) => {
      const { id } = request.params;
      const status = manager.unload(id, request.query.deadline_ms);
      request.log.info(
        { pool_id: id, deadline_ms: request.query.deadline_ms, human: `unload of pool ${id} requested` },
        'unload accepted',
      );
      return reply.code(202).send(status);
    },
  );

  app.post(
    '/v2/pools/:id/drain',
    { schema: { params: PoolParams, body: DrainRequestSchema, response: { 202: PoolOperationResponseSchema } } },
    async (request, reply) => {
      const { id } = request.params;
      const op = manager.drain(id, request.body.deadline_ms);
      op.catch((err: unknown) => log.error({ err, pool_id: id }, 'drain failed'));
      request.log.info(
        { pool_id: id, deadline_ms: request.body.deadline_ms, human: `drain of pool ${id} requested` },
        'drain accepted',
      );
      return reply.code(202).send({ pool_id: id, operation: 'drain' as const, state: manager.pools.state(id) });
    },
  );

  app.post(
    '/v2/pools/:id/reload',
    { schema: { params: PoolParams, body: ReloadRequestSchema, response: { 202: PoolOperationResponseSchema } } },
    async (request, reply) => {
      const { id } = request.params;
      const { new_model_ref, sha256, deadline_ms } = request.body;
      const op = manager.reload(id, new_model_ref, sha256, deadline_ms);
      op.catch((err: unknown) => log.error({ err, pool_id: id }, 'reload failed'));
      request.log.info(
        { pool_id: id, model: new_model_ref, human: `reload of pool ${id} to ${new_model_ref} requested` },
        'reload accepted',
      );
      return reply.code(202).send({ pool_id: id, operation: 'reload' as const, state: manager.pools.state(id) });
    },
  );
};
