import type { ServerResponse } from 'node:http';
import { CORRELATION_ID_HEADER, ERROR_STATUS, needsBackoffHeaders, type ErrorEvent } from '@llama-orch/contracts';
import { backoffHeaders, DEFAULT_BACKOFF_MS } from '@llama-orch/daemon-support';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { anthropicErrorBody } from '../../anthropic/anthropic-errors.js';
import { anthropicMessage } from '../../anthropic/message-answer.js';
import { AnthropicEventEncoder } from '../../anthropic/message-encoder.js';
import { countTokensCall, messagesCall, type MessagesCall } from '../../anthropic/message-mapping.js';
import { respondWithAnswer } from '../../openai/answer-response.js';
import { sessionIdFor } from '../../openai/session-key.js';
import type { TaskRecord } from '../../tasks/task-record.js';
import type { AppServices, ServicesOptions } from '../app-services.js';
import { admitDoorTask, sendJsonText } from '../door-tasks.js';
import { abandonTask, serveTaskEvents } from '../task-streams.js';

/**
 * The Anthropic Messages door: `POST /v1/messages` (streamed and not) and
 * `POST /v1/messages/count_tokens`. Each request is translated to a chat task
 * (`anthropic/message-mapping.ts`) and admitted through the same path as `/v1/chat/completions`
 * (auth — a Bearer token or `x-api-key`, the same keys —, rate limits, lanes, placement, cancel on
 * disconnect, metrics, correlated logs; `door: anthropic` on its log lines). Streams are the task's
 * token records through `AnthropicEventEncoder`; a non-streamed message is the engine's one chat
 * answer rendered by `anthropicMessage`. Errors take Anthropic's shape (http/error-handler.ts).
 */

function refuse(res: ServerResponse, err: ErrorEvent, correlationId: string): void {
  const headers: Record<string, string> = needsBackoffHeaders(err.code) ? backoffHeaders(DEFAULT_BACKOFF_MS) : {};
  headers[CORRELATION_ID_HEADER] = correlationId;
  sendJsonText(res, ERROR_STATUS[err.code], JSON.stringify(anthropicErrorBody(err)), headers);
}

/** Answers a non-streamed request once its task has the engine's answer, in the text `render` makes of it. */
function answerOnce(services: AppServices, req: FastifyRequest, reply: FastifyReply, task: TaskRecord, model: string, render: (body: Record<string, unknown>) => string): void {
  reply.hijack();
  const abandon = abandonTask(services, req, task);
  respondWithAnswer({
    res: reply.raw,
    task,
    who: { kind: 'chat', id: `msg_${task.id}`, created: Math.floor(services.clock.now() / 1000), model },
    render,
    onClientGone: () => {
      if (task.stream.subscriberCount === 0) abandon();
    },
    sendAnswer: (text) => sendJsonText(reply.raw, 200, text, { [CORRELATION_ID_HEADER]: req.id }),
    sendRefusal: (err) => refuse(reply.raw, err, req.id),
  });
}

function sessionOf(req: FastifyRequest): string | undefined {
  const user = (req.body as { metadata?: { user_id?: unknown } } | null)?.metadata?.user_id;
  return sessionIdFor(req.headers['x-session-id'], typeof user === 'string' ? user : undefined);
}

function messages(services: AppServices, req: FastifyRequest, reply: FastifyReply, call: MessagesCall): void {
  const task = admitDoorTask(services, req, call, 'anthropic');
  const who = { id: `msg_${task.id}`, model: call.model };
  if (!call.stream) {
    answerOnce(services, req, reply, task, call.model, (body) => JSON.stringify(anthropicMessage(body, who)));
    return;
  }
  serveTaskEvents(services, req, reply, task, { encoder: new AnthropicEventEncoder(who), lazyHead: true, onRefused: (err) => refuse(reply.raw, err, req.id) });
}

export const anthropicRoutes: FastifyPluginAsyncZod<ServicesOptions> = async (app, { services }) => {
  app.post('/v1/messages', (req, reply) => {
    messages(services, req, reply, messagesCall(req.body, sessionOf(req)));
  });
  app.post('/v1/messages/count_tokens', (req, reply) => {
    const call = countTokensCall(req.body, sessionOf(req));
    const task = admitDoorTask(services, req, call, 'anthropic');
    answerOnce(services, req, reply, task, call.model, (body) => {
      const usage = (body as { usage?: { prompt_tokens?: number } }).usage;
      return JSON.stringify({ input_tokens: usage?.prompt_tokens ?? 0 });
    });
  });
};
