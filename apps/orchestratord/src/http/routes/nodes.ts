import {
  HeartbeatRequestSchema,
  NodeAckSchema,
  NodeIdSchema,
  NodeListSchema,
  NodeRegisterRequestSchema,
} from '@llama-orch/contracts';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { NotFoundError } from '../../errors.js';
import type { ServicesOptions } from '../app-services.js';

const NodeParams = z.object({ id: z.string() });

/** Node API (Bearer): register, heartbeat, deregister, list. */
export const nodesRoutes: FastifyPluginAsyncZod<ServicesOptions> = async (app, { services }) => {
  const { registry, nodeSync, metrics } = services;

  app.post(
    '/v2/nodes/register',
    {
      schema: { body: NodeRegisterRequestSchema, response: { 200: NodeAckSchema } },
    },
    async (req) => {
      const ack = nodeSync === undefined ? registry.register(req.body) : await nodeSync.register(req.body);
      metrics.nodeRegistrations.inc({ outcome: 'success' });
      return ack;
    },
  );

  app.post(
    '/v2/nodes/:id/heartbeat',
    {
      schema: { params: NodeParams, body: HeartbeatRequestSchema, response: { 200: NodeAckSchema } },
    },
    async (req) => {
      const id = req.params.id;
      const ack = !NodeIdSchema.safeParse(id).success
        ? undefined
        : nodeSync === undefined
          ? registry.heartbeat(id, req.body)
          : await nodeSync.heartbeat(id, req.body);
      if (ack === undefined) {
        metrics.nodeHeartbeats.inc({ outcome: 'unknown_node' });
        throw new NotFoundError(`node '${req.params.id}' is not registered; register again`);
      }
      metrics.nodeHeartbeats.inc({ outcome: 'success' });
      return ack;
    },
  );

  app.delete('/v2/nodes/:id', { schema: { params: NodeParams } }, async (req, reply) => {
    if (!(nodeSync === undefined ? registry.deregister(req.params.id) : await nodeSync.deregister(req.params.id))) {
      metrics.nodeDeregistrations.inc({ outcome: 'unknown_node' });
      throw new NotFoundError(`node '${req.params.id}' is not registered`);
    }
    metrics.nodeDeregistrations.inc({ outcome: 'success' });
    return reply.code(204).send();
  });

  app.get('/v2/nodes', { schema: { response: { 200: NodeListSchema } } }, async () => ({ nodes: registry.list() }));
};
