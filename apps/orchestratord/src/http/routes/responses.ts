import type { ServerResponse } from 'node:http';
import { CORRELATION_ID_HEADER, ERROR_STATUS, needsBackoffHeaders, type ErrorEvent } from '@llama-orch/contracts';
import { backoffHeaders, DEFAULT_BACKOFF_MS } from '@llama-orch/daemon-support';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { respondWithAnswer } from '../../openai/answer-response.js';
import { openAiErrorBody } from '../../openai/openai-errors.js';
import { sessionIdFor } from '../../openai/session-key.js';
import { ResponsesEventEncoder } from '../../responses/event-encoder.js';
import { responsesCall } from '../../responses/request-mapping.js';
import { responseFromChat, type ResponseIdentity } from '../../responses/response-object.js';
import type { ServicesOptions } from '../app-services.js';
import { admitDoorTask, sendJsonText } from '../door-tasks.js';
import { abandonTask, serveTaskEvents } from '../task-streams.js';

/**
 * The OpenAI Responses door: `POST /v1/responses`, streamed and not, for the stateless subset a
 * chat engine serves. Each request is translated to a chat task (`responses/request-mapping.ts`)
 * and admitted through the same path as `/v1/chat/completions` (auth and keys, rate limits, lanes,
 * placement, cancel on disconnect, metrics, correlated logs; `door: responses` on its log lines).
 * Streams are the task's token records through `ResponsesEventEncoder`; a non-streamed response is
 * the engine's one chat answer rendered by `responseFromChat`. Errors take OpenAI's shape (a /v1
 * path: http/error-handler.ts).
 */

function refuse(res: ServerResponse, err: ErrorEvent, correlationId: string): void {
  const headers: Record<string, string> = needsBackoffHeaders(err.code) ? backoffHeaders(DEFAULT_BACKOFF_MS) : {};
  headers[CORRELATION_ID_HEADER] = correlationId;
  sendJsonText(res, ERROR_STATUS[err.code], JSON.stringify(openAiErrorBody(err)), headers);
}

export const responsesRoutes: FastifyPluginAsyncZod<ServicesOptions> = async (app, { services }) => {
  app.post('/v1/responses', (req, reply) => {
    const body = req.body as { user?: unknown; safety_identifier?: unknown; prompt_cache_key?: unknown } | null;
    const key = [body?.user, body?.safety_identifier, body?.prompt_cache_key].find((v): v is string => typeof v === 'string');
    const call = responsesCall(req.body, sessionIdFor(req.headers['x-session-id'], key));
    const task = admitDoorTask(services, req, call, 'responses');
    const createdAt = Math.floor(services.clock.now() / 1000);
    const who: ResponseIdentity = { id: `resp_${task.id}`, createdAt, model: call.model, request: call.request, taskId: task.id };
    if (call.stream) {
      serveTaskEvents(services, req, reply, task, { encoder: new ResponsesEventEncoder(who), lazyHead: true, onRefused: (err) => refuse(reply.raw, err, req.id) });
      return;
    }
    reply.hijack();
    const abandon = abandonTask(services, req, task);
    respondWithAnswer({
      res: reply.raw,
      task,
      who: { kind: 'chat', id: who.id, created: createdAt, model: call.model },
      render: (chat) => JSON.stringify(responseFromChat(chat, who)),
      onClientGone: () => {
        if (task.stream.subscriberCount === 0) abandon();
      },
      sendAnswer: (text) => sendJsonText(reply.raw, 200, text, { [CORRELATION_ID_HEADER]: req.id }),
      sendRefusal: (err) => refuse(reply.raw, err, req.id),
    });
  });
};
