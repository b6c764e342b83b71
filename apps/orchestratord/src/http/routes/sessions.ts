import { SessionInfoSchema } from '@llama-orch/contracts';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { NotFoundError } from '../../errors.js';
import type { ServicesOptions } from '../app-services.js';

const SessionParams = z.object({ id: z.string() });

/** `GET /v2/sessions/{id}` (SessionInfo) and `DELETE /v2/sessions/{id}`. */
export const sessionRoutes: FastifyPluginAsyncZod<ServicesOptions> = async (app, { services }) => {
  app.get('/v2/sessions/:id', { schema: { params: SessionParams, response: { 200: SessionInfoSchema } } }, async (req) => {
    const info = await services.sessionReader.get(req.params.id);
    if (info === undefined) throw new NotFoundError(`session '${req.params.id}' not found (unknown or expired)`);
    return info;
  });

  app.delete('/v2/sessions/:id', { schema: { params: SessionParams } }, async (req, reply) => {
    if (!(await services.sessionReader.delete(req.params.id))) throw new NotFoundError(`session '${req.params.id}' not found (unknown or expired)`);
    return reply.code(204).send();
  });
};
