import type { ErrorEvent } from '@llama-orch/contracts';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { openAiErrorBody } from '../../openai/openai-errors.js';
import { sessionIdFor } from '../../openai/session-key.js';
import { ResponsesEventEncoder } from '../../responses/event-encoder.js';
import { responsesCall } from '../../responses/request-mapping.js';
import { responseFromChat, type ResponseIdentity } from '../../responses/response-object.js';
import type { ServicesOptions } from '../app-services.js';
import { admitDoorTask, answerOnce, sendRefusal } from '../door-tasks.js';
import { serveTaskEvents } from '../task-streams.js';

/**
 * The OpenAI Responses door: `POST /v1/responses`, streamed and not, for the stateless subset a
 * chat engine serves. Each request is translated to a chat task (`responses/request-mapping.ts`)
 * and admitted through the same path as `/v1/chat/completions` (auth and keys, rate limits, lanes,
 * placement, cancel on disconnect, metrics, correlated logs; `door: responses` on its log lines).
 * Streams are the task's token records through `ResponsesEventEncoder`; a non-streamed response is
 * the engine's one chat answer rendered by `responseFromChat`. Errors take OpenAI's shape (a /v1
 * path: http/error-handler.ts).
 */
export const responsesRoutes: FastifyPluginAsyncZod<ServicesOptions> = async (app, { services }) => {
  app.post('/v1/responses', async (req, reply) => {
    const body = req.body as { user?: unknown; safety_identifier?: unknown; prompt_cache_key?: unknown } | null;
    const key = [body?.user, body?.safety_identifier, body?.prompt_cache_key].find(
      (v): v is string => typeof v === 'string',
    );
    const call = responsesCall(req.body, sessionIdFor(req.headers['x-session-id'], key));
    const task = await admitDoorTask(services, req, call, 'responses');
    const createdAt = Math.floor(services.clock.now() / 1000);
    const who: ResponseIdentity = {
      id: `resp_${task.id}`,
      createdAt,
      model: call.model,
      request: call.request,
      taskId: task.id,
    };
    const refuse = (err: ErrorEvent): void => sendRefusal(reply.raw, err, req.id, openAiErrorBody(err));
    if (call.stream)
      serveTaskEvents(services, req, reply, task, {
        encoder: new ResponsesEventEncoder(who),
        lazyHead: true,
        onRefused: refuse,
      });
    else
      answerOnce(services, req, reply, task, {
        who: { kind: 'chat', id: who.id, created: createdAt, model: call.model },
        render: (chat) => JSON.stringify(responseFromChat(chat, who)),
        refuse,
      });
    return reply;
  });
};
