import { randomUUID } from 'node:crypto';
import { CORRELATION_ID_HEADER, isCorrelationId } from '@llama-orch/contracts';
import type { FastifyPluginCallback } from 'fastify';
import fp from 'fastify-plugin';

/**
 * Request id = correlation id: the incoming `X-Correlation-Id` when it has the one format both
 * daemons accept (contracts' `isCorrelationId`), else a fresh UUID. Used as Fastify's `genReqId`
 * with `requestIdLogLabel: 'correlation_id'`, so every line logged through the request's logger
 * carries it; orchestratord sends its task's id with every dispatch, pool-managerd keeps it.
 */
export function correlationIdFor(req: { headers: Record<string, string | string[] | undefined> }): string {
  const given = req.headers[CORRELATION_ID_HEADER];
  return isCorrelationId(given) ? given : randomUUID();
}

const correlation: FastifyPluginCallback = (app, _opts, done) => {
  // Callback-style: no promise or microtask turn per request.
  app.addHook('onRequest', (req, reply, next) => {
    reply.header(CORRELATION_ID_HEADER, req.id);
    next();
  });
  done();
};

/** Puts `X-Correlation-Id` on every response (errors, 401s, 404s and event streams included). Register it first. */
export const correlationPlugin = fp(correlation, { name: 'correlation', fastify: '5.x' });
