import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { CORRELATION_ID_HEADER, isCorrelationId } from '@llama-orch/contracts';
import type { FastifyPluginAsync } from 'fastify';
import fp from 'fastify-plugin';

/**
 * Request id = correlation id: the incoming `X-Correlation-Id` when it is a valid id (contracts'
 * `isCorrelationId`, the format both daemons accept), else a fresh UUID. Used as Fastify's
 * `genReqId`, so every log line of the request carries it (`requestIdLogLabel: 'correlation_id'`);
 * a task keeps its admitting request's id and sends it with each dispatch.
 */
export function correlationIdFor(req: IncomingMessage): string {
  const h = req.headers[CORRELATION_ID_HEADER];
  return isCorrelationId(h) ? h : randomUUID();
}

/** Puts `X-Correlation-Id` on every response (errors, 401, 404 and SSE included). */
const correlation: FastifyPluginAsync = async (app) => {
  // Callback-style: no promise or microtask turn per request.
  app.addHook('onRequest', (req, reply, done) => {
    reply.header(CORRELATION_ID_HEADER, req.id);
    done();
  });
};

export const correlationPlugin = fp(correlation, { name: 'correlation', fastify: '5.x' });
