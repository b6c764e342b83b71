import type { FastifyReply } from 'fastify';
import { ERROR_STATUS, RETRIABLE_BY_DEFAULT, needsBackoffHeaders, type ErrorCode, type ErrorEnvelope } from '@llama-orch/contracts';

/** Sends the ErrorEnvelope of `code` with its fixed status; 429/503 get Retry-After + X-Backoff-Ms. */
export function sendError(reply: FastifyReply, code: ErrorCode, message: string, extra: { retryAfterMs?: number; engine?: string } = {}): FastifyReply {
  const body: ErrorEnvelope = { code, message, retriable: RETRIABLE_BY_DEFAULT[code] };
  if (extra.engine !== undefined) body.engine = extra.engine;
  if (needsBackoffHeaders(code)) {
    const ms = Math.max(1000, extra.retryAfterMs ?? 1000);
    body.retry_after_ms = ms;
    reply.header('retry-after', String(Math.max(1, Math.ceil(ms / 1000))));
    reply.header('x-backoff-ms', String(ms));
  }
  return reply.code(ERROR_STATUS[code]).type('application/json; charset=utf-8').send(body);
}
