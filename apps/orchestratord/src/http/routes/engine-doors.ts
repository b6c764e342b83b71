import type { ErrorEvent } from '@llama-orch/contracts';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { embeddingsCall, infillCall, rerankCall, type EngineCallRequest } from '../../openai/engine-call-mapping.js';
import { llamaCppErrorBody } from '../../openai/engine-door-errors.js';
import { InfillEncoder } from '../../openai/infill-encoder.js';
import { listModels } from '../../openai/models.js';
import { openAiErrorBody } from '../../openai/openai-errors.js';
import { sessionIdFor } from '../../openai/session-key.js';
import type { AppServices, ServicesOptions } from '../app-services.js';
import { admitDoorTask, answerOnce, sendRefusal } from '../door-tasks.js';
import { serveTaskEvents } from '../task-streams.js';

/**
 * The engine-route doors (issue 27): `POST /v1/embeddings` (OpenAI's shape), `POST /v1/rerank` and
 * `/rerank`, `POST /infill` (llama-server's shapes). Each request is a task with an engine call
 * (`openai/engine-call-mapping.ts`) admitted through the same path as the other doors
 * (`http/door-tasks.ts`): auth, keys and rate limits, lanes, placement (only on pools that serve the
 * kind: a model none of whose pools can is a 400), cancel on disconnect, metrics, correlated logs.
 * The answer is the engine's own body from the one-answer path, with `model` set to the name asked
 * for; a streamed infill is relayed from the task's token frames (`openai/infill-encoder.ts`).
 * Errors take the door's shape: OpenAI's under /v1, llama-server's on `/rerank` and `/infill`.
 */

type Shape = 'openai' | 'llamacpp';

async function serveCall(
  services: AppServices,
  req: FastifyRequest,
  reply: FastifyReply,
  call: EngineCallRequest,
  shape: Shape,
): Promise<FastifyReply> {
  // A model that is listed but cannot serve this kind is refused by admission (400, `param: model`).
  const task = await admitDoorTask(services, req, call, call.kind);
  const refuse = (err: ErrorEvent): void =>
    sendRefusal(reply.raw, err, req.id, shape === 'openai' ? openAiErrorBody(err) : llamaCppErrorBody(err));
  if (call.stream) {
    serveTaskEvents(services, req, reply, task, {
      encoder: new InfillEncoder(call.model),
      lazyHead: true,
      onRefused: refuse,
    });
    return reply;
  }
  answerOnce(services, req, reply, task, {
    who: { kind: 'completion', id: task.id, created: Math.floor(services.clock.now() / 1000), model: call.model },
    // The engine's body as it is but for the model's name: these routes carry no id or created.
    render: (body) => {
      body.model = call.model;
      return JSON.stringify(body);
    },
    onNoAnswer: () => refuse({ code: 'INTERNAL', message: 'the task was canceled before its answer', retriable: true }),
    refuse,
  });
  return reply;
}

/** `POST /v1/embeddings`, `POST /v1/rerank`, `POST /rerank`, `POST /infill`. */
export const engineDoorRoutes: FastifyPluginAsyncZod<ServicesOptions> = async (app, { services }) => {
  const { registry, clock } = services;
  // Editor plugins send no model to /infill: the one model that serves infill, when there is one.
  const soleInfillModel = (): string | undefined => {
    const infill = listModels(registry.pools(), (ref) => registry.modelFirstSeen(ref), clock.now()).filter(
      (m) => m.capabilities?.includes('infill') === true,
    );
    return infill.length === 1 ? infill[0]?.id : undefined;
  };

  app.post('/v1/embeddings', (req, reply) => serveCall(services, req, reply, embeddingsCall(req.body), 'openai'));
  app.post('/v1/rerank', (req, reply) => serveCall(services, req, reply, rerankCall(req.body), 'openai'));
  app.post('/rerank', (req, reply) => serveCall(services, req, reply, rerankCall(req.body), 'llamacpp'));
  // A session (`X-Session-Id`) keeps an editor's completions on the pool that caches its file.
  app.post('/infill', (req, reply) =>
    serveCall(
      services,
      req,
      reply,
      infillCall(req.body, soleInfillModel, sessionIdFor(req.headers['x-session-id'], undefined)),
      'llamacpp',
    ),
  );
};
