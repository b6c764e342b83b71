import { CORRELATION_ID_HEADER, needsBackoffHeaders, type ErrorEnvelope } from '@llama-orch/contracts';
import type { FastifyError, FastifyPluginAsync, FastifyReply } from 'fastify';
import fp from 'fastify-plugin';
import { isOpenAiPath, openAiErrorBody } from '../openai/openai-errors.js';
import {
  InternalError, InvalidParamsError, NotFoundError, OrchdError, PayloadTooLargeError,
} from '../errors.js';

interface ValidationIssue {
  instancePath?: string;
  message?: string;
  keyword?: string;
  params?: Record<string, unknown>;
}

/** `field: message` for each issue; unknown keys are named. */
export function describeValidation(context: string | undefined, issues: readonly ValidationIssue[]): string {
  const parts = issues.map((i) => {
    const path = (i.instancePath ?? '').split('/').filter(Boolean).join('.');
    if (i.keyword === 'unrecognized_keys' && Array.isArray(i.params?.keys)) {
      const keys = (i.params.keys as unknown[]).map((k) => (path ? `${path}.${String(k)}` : String(k)));
      return `unknown field${keys.length > 1 ? 's' : ''} ${keys.map((k) => `'${k}'`).join(', ')}`;
    }
    return `${path || context || 'body'}: ${i.message ?? 'invalid'}`;
  });
  return parts.join('; ');
}

/** Maps anything thrown in a request to an OrchdError. */
export function toOrchdError(err: unknown): OrchdError {
  if (err instanceof OrchdError) return err;
  const fe = err as Partial<FastifyError> & { validation?: ValidationIssue[]; validationContext?: string };
  if (Array.isArray(fe.validation) && fe.validation.length > 0) {
    return new InvalidParamsError(describeValidation(fe.validationContext, fe.validation));
  }
  if (fe.code === 'FST_ERR_CTP_BODY_TOO_LARGE' || fe.statusCode === 413) {
    return new PayloadTooLargeError(fe.message ?? 'request body is too large');
  }
  if (fe.statusCode === 404) return new NotFoundError(fe.message ?? 'not found');
  if (typeof fe.statusCode === 'number' && fe.statusCode >= 400 && fe.statusCode < 500) {
    // Malformed JSON, empty JSON body, unsupported content type, bad content length, …
    return new InvalidParamsError(`body: ${fe.message ?? 'malformed request'}`);
  }
  return new InternalError('internal error', { cause: err });
}

/**
 * Sends an ErrorEnvelope with its fixed status; 429/503 carry Retry-After and X-Backoff-Ms. On the
 * /v1 door the body takes OpenAI's shape instead (same status and headers).
 */
export function sendError(reply: FastifyReply, error: OrchdError): FastifyReply {
  const envelope: ErrorEnvelope = error.toEnvelope();
  if (needsBackoffHeaders(error.code)) {
    const ms = Math.max(1, envelope.retry_after_ms ?? 1000);
    envelope.retry_after_ms = ms;
    envelope.retriable ??= true;
    reply.header('retry-after', String(Math.max(1, Math.ceil(ms / 1000))));
    reply.header('x-backoff-ms', String(ms));
  }
  reply.header(CORRELATION_ID_HEADER, reply.request.id);
  const body = isOpenAiPath(reply.request.url) ? openAiErrorBody(error) : envelope;
  return reply.code(error.status).type('application/json; charset=utf-8').send(body);
}

/** One error handler and one 404 handler for the whole app. */
const errors: FastifyPluginAsync = async (app) => {
  app.setErrorHandler((err, req, reply) => {
    const error = toOrchdError(err);
    if (error.status >= 500 && error.code === 'INTERNAL') req.log.error({ err }, 'request failed');
    else req.log.info({ code: error.code, status: error.status, msg_detail: error.message }, 'request refused');
    return sendError(reply, error);
  });
  app.setNotFoundHandler((req, reply) => sendError(reply, new NotFoundError(`route ${req.method} ${req.url.split('?', 1)[0]} not found`)));
};

export const errorsPlugin = fp(errors, { name: 'errors', fastify: '5.x' });
