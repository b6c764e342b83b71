import { randomUUID } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { CORRELATION_ID_HEADER, isCorrelationId } from '@llama-orch/contracts';

/**
 * Request id = correlation id: the incoming `X-Correlation-Id` (orchestratord sends its task's id
 * with every dispatch) when it has the one format both daemons accept, else a fresh UUID. Used as
 * Fastify's `genReqId` with `requestIdLogLabel: 'correlation_id'`, so every line logged through the
 * request's logger — the whole dispatch included — carries it.
 */
export function correlationIdFor(req: { headers: Record<string, string | string[] | undefined> }): string {
  const given = req.headers[CORRELATION_ID_HEADER];
  return isCorrelationId(given) ? given : randomUUID();
}

/** Puts `X-Correlation-Id` on every response (errors, 401s and 404s included). Register it first. */
export const correlationPlugin = fp(
  async (app: FastifyInstance) => {
    // Callback-style: no promise per request (performance notes: request hooks).
    app.addHook('onRequest', (request, reply, done) => {
      reply.header(CORRELATION_ID_HEADER, request.id);
      done();
    });
  },
  { name: 'correlation' },
);
