import { requestError, sendErrorEnvelope } from '@llama-orch/daemon-support';
import type { FastifyPluginAsync, FastifyReply } from 'fastify';
import fp from 'fastify-plugin';
import { anthropicErrorBody, isAnthropicPath } from '../anthropic/anthropic-errors.js';
import { isOpenAiPath, openAiErrorBody } from '../openai/openai-errors.js';
import { isLlamaCppDoorPath, llamaCppErrorBody } from '../openai/engine-door-errors.js';
import { InternalError, InvalidParamsError, NotFoundError, OrchdError, PayloadTooLargeError } from '../errors.js';

/** Maps anything thrown in a request to an OrchdError. */
export function toOrchdError(err: unknown): OrchdError {
  if (err instanceof OrchdError) return err;
  const refused = requestError(err);
  if (refused === undefined) return new InternalError('internal error', { cause: err });
  if (refused.code === 'PAYLOAD_TOO_LARGE') return new PayloadTooLargeError(refused.message);
  if (refused.code === 'NOT_FOUND') return new NotFoundError(refused.message);
  return new InvalidParamsError(refused.message);
}

/**
 * Sends an ErrorEnvelope with its fixed status; 429/503 carry Retry-After and X-Backoff-Ms. On the
 * /v1 door the body takes OpenAI's shape instead, on the Anthropic door (`/v1/messages…`)
 * Anthropic's, on `/rerank` and `/infill` llama-server's (same status and headers).
 */
export function sendError(reply: FastifyReply, error: OrchdError): FastifyReply {
  const url = reply.request.url;
  const render = isAnthropicPath(url)
    ? () => anthropicErrorBody(error)
    : isOpenAiPath(url)
      ? () => openAiErrorBody(error)
      : isLlamaCppDoorPath(url)
        ? () => llamaCppErrorBody(error)
        : undefined;
  return sendErrorEnvelope(reply, error.status, error.toEnvelope(), render);
}

/** One error handler and one 404 handler for the whole app. */
const errors: FastifyPluginAsync = async (app) => {
  app.setErrorHandler((err, req, reply) => {
    const error = toOrchdError(err);
    if (error.status >= 500 && error.code === 'INTERNAL') req.log.error({ err }, 'request failed');
    else req.log.info({ code: error.code, status: error.status, msg_detail: error.message }, 'request refused');
    return sendError(reply, error);
  });
  app.setNotFoundHandler((req, reply) =>
    sendError(reply, new NotFoundError(`route ${req.method} ${req.url.split('?', 1)[0]} not found`)),
  );
};

export const errorsPlugin = fp(errors, { name: 'errors', fastify: '5.x' });
