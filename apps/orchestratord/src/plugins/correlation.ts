import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { FastifyPluginAsync } from 'fastify';
import fp from 'fastify-plugin';

export const CORRELATION_HEADER = 'x-correlation-id';
const VALID_ID = /^[A-Za-z0-9._:@/+=-]{1,128}$/;

/**
 * Request id = correlation id: the incoming `X-Correlation-Id` when it is a sane token (1–128
 * URL-safe characters), else a fresh UUID. Used as Fastify's `genReqId`, so every log line of the
 * request carries it (`requestIdLogLabel: 'correlation_id'`).
 */
export function correlationIdFor(req: IncomingMessage): string {
  const h = req.headers[CORRELATION_HEADER];
  return typeof h === 'string' && VALID_ID.test(h) ? h : randomUUID();
}

/** Puts `X-Correlation-Id` on every response (errors, 401, 404 and SSE included). */
const correlation: FastifyPluginAsync = async (app) => {
  // Callback-style hooks: an async hook costs a promise and a microtask turn on every request.
  app.addHook('onRequest', (req, reply, done) => {
    reply.header(CORRELATION_HEADER, req.id);
    done();
  });
};

export const correlationPlugin = fp(correlation, { name: 'correlation', fastify: '5.x' });
