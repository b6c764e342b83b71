import type { FastifyError, FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { hasZodFastifySchemaValidationErrors } from 'fastify-type-provider-zod';
import { PoolManagerError, RetriableRefusal } from '../errors.js';
import { sendError } from './error-envelope.js';

/** One error handler for the whole app: every failure leaves as an ErrorEnvelope. */
export const errorHandlerPlugin = fp(
  async (app: FastifyInstance) => {
    app.setErrorHandler((err: FastifyError, request, reply) => {
      if (err instanceof PoolManagerError) {
        if (err.status >= 500) request.log.warn({ err }, 'request failed');
        return sendError(reply, err.errorCode, err.message, err instanceof RetriableRefusal ? { retryAfterMs: err.retryAfterMs } : {});
      }
      if (hasZodFastifySchemaValidationErrors(err)) {
        const where = err.validationContext ?? 'body';
        const detail = err.validation
          .map((v) => `${where}${v.instancePath.replaceAll('/', '.')}: ${v.message ?? 'invalid'}`)
          .join('; ');
        return sendError(reply, 'INVALID_PARAMS', detail);
      }
      if (err.statusCode === 413) return sendError(reply, 'PAYLOAD_TOO_LARGE', err.message);
      if (err.statusCode !== undefined && err.statusCode >= 400 && err.statusCode < 500) {
        return sendError(reply, err.statusCode === 404 ? 'NOT_FOUND' : 'INVALID_PARAMS', err.message);
      }
      request.log.error({ err }, 'unhandled error');
      return sendError(reply, 'INTERNAL', 'internal error');
    });
    app.setNotFoundHandler((request, reply) => sendError(reply, 'NOT_FOUND', `no route ${request.method} ${request.url.split('?')[0] ?? ''}`));
  },
  { name: 'error-handler' },
);
