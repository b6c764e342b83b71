import { ERROR_STATUS, RETRIABLE_BY_DEFAULT, type ErrorCode, type ErrorEnvelope } from '@llama-orch/contracts';
import { requestError, sendErrorEnvelope, type EnvelopeReply } from '@llama-orch/daemon-support';
import type { FastifyError, FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { PoolManagerError, RetriableRefusal } from '../errors.js';

/** Sends the ErrorEnvelope of `code` with its fixed status; 429/503 get Retry-After + X-Backoff-Ms. */
export function sendError<R extends EnvelopeReply>(
  reply: R,
  code: ErrorCode,
  message: string,
  extra: { retryAfterMs?: number; engine?: string } = {},
): R {
  const envelope: ErrorEnvelope = { code, message, retriable: RETRIABLE_BY_DEFAULT[code] };
  if (extra.engine !== undefined) envelope.engine = extra.engine;
  if (extra.retryAfterMs !== undefined) envelope.retry_after_ms = extra.retryAfterMs;
  return sendErrorEnvelope(reply, ERROR_STATUS[code], envelope);
}

/** One error handler for the whole app: every failure leaves as an ErrorEnvelope. */
export const errorHandlerPlugin = fp(
  async (app: FastifyInstance) => {
    app.setErrorHandler((err: FastifyError, request, reply) => {
      if (err instanceof PoolManagerError) {
        if (err.status >= 500) request.log.warn({ err }, 'request failed');
        return sendError(
          reply,
          err.errorCode,
          err.message,
          err instanceof RetriableRefusal ? { retryAfterMs: err.retryAfterMs } : {},
        );
      }
      const refused = requestError(err);
      if (refused !== undefined) return sendError(reply, refused.code, refused.message);
      request.log.error({ err }, 'unhandled error');
      return sendError(reply, 'INTERNAL', 'internal error');
    });
    app.setNotFoundHandler((request, reply) =>
      sendError(reply, 'NOT_FOUND', `no route ${request.method} ${request.url.split('?')[0] ?? ''}`),
    );
  },
  { name: 'error-handler' },
);
