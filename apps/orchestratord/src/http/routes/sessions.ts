import { SessionInfoSchema } from '@llama-orch/contracts';
import type { FastifyRequest } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { NotFoundError } from '../../errors.js';
import { ownedSessionId } from '../../sessions/session-ids.js';
import type { ServicesOptions } from '../app-services.js';

const SessionParams = z.object({ id: z.string() });
const SessionQuery = z.object({ key: z.string().optional() });

/**
 * The session `id` names for this caller: its own key's session (the same id under another key is
 * another session); an operator key names another key's session with `?key=<name>`. A client key's
 * `key` is ignored: it reaches only its own sessions, and another key's answers as unknown.
 */
function sessionIdOf(req: FastifyRequest, id: string, key: string | undefined): string {
  const principal = req.principal;
  return ownedSessionId(principal?.role === 'operator' && key !== undefined ? key : principal?.name, id);
}

/** `GET /v2/sessions/{id}` (SessionInfo) and `DELETE /v2/sessions/{id}`. */
export const sessionRoutes: FastifyPluginAsyncZod<ServicesOptions> = async (app, { services }) => {
  const notFound = (id: string) => new NotFoundError(`session '${id}' not found (unknown or expired)`);

  app.get(
    '/v2/sessions/:id',
    { schema: { params: SessionParams, querystring: SessionQuery, response: { 200: SessionInfoSchema } } },
    async (req) => {
      const info = await services.sessionReader.get(sessionIdOf(req, req.params.id, req.query.key));
      if (info === undefined) throw notFound(req.params.id);
      // The id the client knows, not the one it is kept under.
      return { ...info, session_id: req.params.id };
    },
  );

  app.delete(
    '/v2/sessions/:id',
    { schema: { params: SessionParams, querystring: SessionQuery } },
    async (req, reply) => {
      if (!(await services.sessionReader.delete(sessionIdOf(req, req.params.id, req.query.key))))
        throw notFound(req.params.id);
      return reply.code(204).send();
    },
  );
};
