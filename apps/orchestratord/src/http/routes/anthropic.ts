import type { ErrorEvent } from '@llama-orch/contracts';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { anthropicErrorBody } from '../../anthropic/anthropic-errors.js';
import { anthropicMessage } from '../../anthropic/message-answer.js';
import { AnthropicEventEncoder } from '../../anthropic/message-encoder.js';
import { countTokensCall, messagesCall, type MessagesCall } from '../../anthropic/message-mapping.js';
import type { ResponseIdentity } from '../../openai/chunks.js';
import { sessionIdFor } from '../../openai/session-key.js';
import type { TaskRecord } from '../../tasks/task-record.js';
import type { AppServices, ServicesOptions } from '../app-services.js';
import { admitDoorTask, answerOnce, sendRefusal } from '../door-tasks.js';
import { serveTaskEvents } from '../task-streams.js';

/**
 * The Anthropic Messages door: `POST /v1/messages` (streamed and not) and
 * `POST /v1/messages/count_tokens`. Each request is translated to a chat task
 * (`anthropic/message-mapping.ts`) and admitted through the same path as `/v1/chat/completions`
 * (auth — a Bearer token or `x-api-key`, the same keys —, rate limits, lanes, placement, cancel on
 * disconnect, metrics, correlated logs; `door: anthropic` on its log lines). Streams are the task's
 * token records through `AnthropicEventEncoder`; a non-streamed message is the engine's one chat
 * answer rendered by `anthropicMessage`. Errors take Anthropic's shape (http/error-handler.ts).
 */

/** The chat identity of a task's engine answer (a task cancelled before its answer gets an empty one from it). */
function chatIdentity(services: AppServices, task: TaskRecord, model: string): ResponseIdentity {
  return { kind: 'chat', id: `msg_${task.id}`, created: Math.floor(services.clock.now() / 1000), model };
}

function sessionOf(req: FastifyRequest): string | undefined {
  const user = (req.body as { metadata?: { user_id?: unknown } } | null)?.metadata?.user_id;
  return sessionIdFor(req.headers['x-session-id'], typeof user === 'string' ? user : undefined);
}

async function messages(
  services: AppServices,
  req: FastifyRequest,
  reply: FastifyReply,
  call: MessagesCall,
): Promise<FastifyReply> {
  const task = await admitDoorTask(services, req, call, 'anthropic');
  const who = { id: `msg_${task.id}`, model: call.model };
  const refuse = (err: ErrorEvent): void => sendRefusal(reply.raw, err, req.id, anthropicErrorBody(err));
  if (call.stream)
    serveTaskEvents(services, req, reply, task, {
      encoder: new AnthropicEventEncoder(who),
      lazyHead: true,
      onRefused: refuse,
    });
  else
    answerOnce(services, req, reply, task, {
      who: chatIdentity(services, task, call.model),
      render: (body) => JSON.stringify(anthropicMessage(body, who)),
      refuse,
    });
  return reply;
}

export const anthropicRoutes: FastifyPluginAsyncZod<ServicesOptions> = async (app, { services }) => {
  app.post('/v1/messages', (req, reply) => {
    return messages(services, req, reply, messagesCall(req.body, sessionOf(req)));
  });
  app.post('/v1/messages/count_tokens', async (req, reply) => {
    const call = countTokensCall(req.body, sessionOf(req));
    const task = await admitDoorTask(services, req, call, 'anthropic');
    answerOnce(services, req, reply, task, {
      who: chatIdentity(services, task, call.model),
      render: (body) =>
        JSON.stringify({ input_tokens: (body as { usage?: { prompt_tokens?: number } }).usage?.prompt_tokens ?? 0 }),
      refuse: (err) => sendRefusal(reply.raw, err, req.id, anthropicErrorBody(err)),
    });
    return reply;
  });
};
