import { randomUUID } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import { CORRELATION_ID_HEADER, ERROR_STATUS, needsBackoffHeaders, resolveTaskRequest, type ErrorEvent } from '@llama-orch/contracts';
import { backoffHeaders, DEFAULT_BACKOFF_MS } from '@llama-orch/daemon-support';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { NotFoundError } from '../../errors.js';
import { respondWithAnswer } from '../../openai/answer-response.js';
import { embeddingsCall, infillCall, rerankCall, type EngineCallRequest } from '../../openai/engine-call-mapping.js';
import { llamaCppErrorBody } from '../../openai/engine-door-errors.js';
import { InfillEncoder } from '../../openai/infill-encoder.js';
import { listModels } from '../../openai/models.js';
import { openAiErrorBody } from '../../openai/openai-errors.js';
import { sessionIdFor } from '../../openai/session-key.js';
import type { AppServices, ServicesOptions } from '../app-services.js';
import { withPriorityCeiling } from '../client-keys.js';
import { abandonTask, serveTaskEvents } from '../task-streams.js';

/**
 * The engine-route doors (issue 27): `POST /v1/embeddings` (OpenAI's shape), `POST /v1/rerank` and
 * `/rerank`, `POST /infill` (llama-server's shapes). Each request is a task with an engine call
 * (`openai/engine-call-mapping.ts`) admitted through the same `TaskService` as the chat door —
 * auth, keys and rate limits, lanes, placement (only on pools that serve the kind: a model none of
 * whose pools can is a 400), cancel on disconnect, metrics, correlated logs. The answer is the
 * engine's own body from the one-answer path, with `model` set to the name asked for; a streamed
 * infill is relayed from the task's token frames (`openai/infill-encoder.ts`). Errors take the
 * door's shape: OpenAI's under /v1, llama-server's on `/rerank` and `/infill`.
 */

type Shape = 'openai' | 'llamacpp';

function errorBody(shape: Shape, err: ErrorEvent): object {
  return shape === 'openai' ? openAiErrorBody(err) : llamaCppErrorBody(err);
}

function sendJson(res: ServerResponse, status: number, text: string, headers: Readonly<Record<string, string>>): void {
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': String(Buffer.byteLength(text)), ...headers });
  res.end(text);
}

/** A task's failure: its ErrorEnvelope status, `Retry-After` on 429/503, the door's body. */
function refuse(res: ServerResponse, shape: Shape, err: ErrorEvent, correlationId: string): void {
  const headers: Record<string, string> = needsBackoffHeaders(err.code) ? backoffHeaders(DEFAULT_BACKOFF_MS) : {};
  headers[CORRELATION_ID_HEADER] = correlationId;
  sendJson(res, ERROR_STATUS[err.code], JSON.stringify(errorBody(shape, err)), headers);
}

function serveCall(services: AppServices, req: FastifyRequest, reply: FastifyReply, call: EngineCallRequest, shape: Shape): void {
  // As on the chat door: a name no pool lists is the client's mistake (404); a model that is listed
  // but cannot serve this kind is refused by admission (400, `param: model`).
  if (services.registry.poolsForModel(call.model).length === 0) {
    throw new NotFoundError(`model '${call.model}' not found: no pool serves or provisions it (GET /v1/models lists them)`, { param: 'model' });
  }
  const request = { ...resolveTaskRequest(call.task, { deadlineMs: services.config.default_deadline_ms, newId: randomUUID }), call: call.task.call };
  const delivery = call.stream ? 'stream' : 'answer';
  const admitted = services.tasks.admit(withPriorityCeiling(request, req), req.log.child({ door: call.kind }), req.id, req.principal?.name, delivery);
  const task = services.tasks.get(admitted.task_id);
  if (task === undefined || !('delivery' in task)) throw new Error(`admitted task ${admitted.task_id} is not in the table`);
  const onRefused = (err: ErrorEvent): void => refuse(reply.raw, shape, err, req.id);
  if (delivery === 'stream') {
    serveTaskEvents(services, req, reply, task, { encoder: new InfillEncoder(call.model), lazyHead: true, onRefused });
    return;
  }
  reply.hijack();
  const abandon = abandonTask(services, req, task);
  respondWithAnswer({
    res: reply.raw,
    task,
    who: { kind: 'completion', id: task.id, created: Math.floor(services.clock.now() / 1000), model: call.model },
    onClientGone: () => {
      if (task.stream.subscriberCount === 0) abandon();
    },
    // The engine's body as it is but for the model's name: these routes carry no id or created.
    render: (body) => {
      body.model = call.model;
      return JSON.stringify(body);
    },
    onNoAnswer: () => onRefused({ code: 'INTERNAL', message: 'the task was canceled before its answer', retriable: true }),
    sendAnswer: (text) => sendJson(reply.raw, 200, text, { [CORRELATION_ID_HEADER]: req.id }),
    sendRefusal: onRefused,
  });
}

/** `POST /v1/embeddings`, `POST /v1/rerank`, `POST /rerank`, `POST /infill`. */
export const engineDoorRoutes: FastifyPluginAsyncZod<ServicesOptions> = async (app, { services }) => {
  const { registry, clock } = services;
  // Editor plugins send no model to /infill: the one model that serves infill, when there is one.
  const soleInfillModel = (): string | undefined => {
    const infill = listModels(registry.pools(), (ref) => registry.modelFirstSeen(ref), clock.now()).filter((m) => m.capabilities?.includes('infill') === true);
    return infill.length === 1 ? infill[0]?.id : undefined;
  };

  app.post('/v1/embeddings', (req, reply) => serveCall(services, req, reply, embeddingsCall(req.body), 'openai'));
  app.post('/v1/rerank', (req, reply) => serveCall(services, req, reply, rerankCall(req.body), 'openai'));
  app.post('/rerank', (req, reply) => serveCall(services, req, reply, rerankCall(req.body), 'llamacpp'));
  // A session (`X-Session-Id`) keeps an editor's completions on the pool that caches its file.
  app.post('/infill', (req, reply) => serveCall(services, req, reply, infillCall(req.body, soleInfillModel, sessionIdFor(req.headers['x-session-id'], undefined)), 'llamacpp'));
};
