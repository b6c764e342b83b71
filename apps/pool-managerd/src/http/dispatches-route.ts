import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { DispatchPathSchema, DispatchReattachQuerySchema } from '@llama-orch/contracts';
import type { PoolManager } from '../pools/pool-manager.js';
import { heldSink, startNdjson } from './held-sink.js';

/**
 * Re-attachable dispatches (`reattach_ms` on the dispatch; pools/held-dispatch.ts), on both
 * listeners. `GET /v2/pools/{id}/dispatches/{task_id}?after=<i>`: 200 NDJSON, the held token lines
 * with `i > after` (absent or -1: all), then the live ones, then one `end` or `error`; the
 * connection attached before, if any, is ended without cancelling the generation (last attacher
 * wins). `DELETE`: cancels the engine request (an attached connection gets `end` with
 * `stop_type: cancel`), 204. Both 404 NOT_FOUND when no such dispatch is held.
 */
export const dispatchesRoute: FastifyPluginAsyncZod<{ manager: PoolManager }> = async (app, { manager }) => {
  // No HEAD twin: it would run this handler and take the dispatch over.
  app.get(
    '/v2/pools/:id/dispatches/:task_id',
    { exposeHeadRoute: false, schema: { params: DispatchPathSchema, querystring: DispatchReattachQuerySchema } },
    async (request, reply) => {
      const held = manager.held.find(request.params.id, request.params.task_id);
      const after = request.query.after === undefined ? -1 : Number(request.query.after);
      const res = startNdjson(request, reply);
      held.attach(heldSink(request, res, held), after);
    },
  );

  app.delete(
    '/v2/pools/:id/dispatches/:task_id',
    { schema: { params: DispatchPathSchema } },
    async (request, reply) => {
      manager.held.cancel(request.params.id, request.params.task_id);
      return reply.code(204).send();
    },
  );
};
