import { OpenAiModelListSchema, type ErrorEvent } from '@llama-orch/contracts';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { modelNotFound } from '../../catalog/model-not-found.js';
import { findModel, listModels } from '../../openai/models.js';
import { OpenAiChunkEncoder } from '../../openai/chunk-encoder.js';
import { openAiErrorBody } from '../../openai/openai-errors.js';
import { chatCall, completionCall, type OpenAiCall } from '../../openai/request-mapping.js';
import { sessionIdFor } from '../../openai/session-key.js';
import type { AppServices, ServicesOptions } from '../app-services.js';
import { admitDoorTask, answerOnce, sendRefusal } from '../door-tasks.js';
import { serveTaskEvents } from '../task-streams.js';

/**
 * The OpenAI-compatible door. Each request becomes the same internal task a `POST /v2/tasks`
 * makes (`openai/request-mapping.ts`) and is admitted through the same `TaskService`: auth,
 * admission queue and lanes, placement and session affinity, the default deadline, cancel on
 * disconnect, metrics and correlated logs are the /v2 ones. The answer is rendered from the task's
 * frame log: streamed through the OpenAI chunk encoder (`openai/chunk-encoder.ts`; the 200 goes out
 * with the first chunk, as llama-server does, or with the first keep-alive, so that proxies see
 * bytes), or answered once from the engine's own answer (`openai/answer-response.ts`). Errors take OpenAI's shape
 * (http/error-handler.ts); a task that fails before anything was sent is a plain HTTP error with
 * the ErrorEnvelope status, after that one last `data: {"error"…}` event.
 */

async function answer(
  services: AppServices,
  req: FastifyRequest,
  reply: FastifyReply,
  call: OpenAiCall,
): Promise<FastifyReply> {
  const task = await admitDoorTask(services, req, call, 'v1');
  const who = {
    kind: call.kind,
    id: `${call.kind === 'chat' ? 'chatcmpl' : 'cmpl'}-${task.id}`,
    created: Math.floor(services.clock.now() / 1000),
    model: call.model,
  };
  const onRefused = (err: ErrorEvent): void => sendRefusal(reply.raw, err, req.id, openAiErrorBody(err));
  if (!call.stream) {
    answerOnce(services, req, reply, task, { who, refuse: onRefused });
    return reply;
  }
  const fingerprint = (): string | undefined => task.placement?.engine_version;
  serveTaskEvents(services, req, reply, task, {
    encoder: new OpenAiChunkEncoder(who, call.includeUsage, fingerprint),
    lazyHead: true,
    onRefused,
  });
  return reply;
}

/** `POST /v1/chat/completions`, `POST /v1/completions`, `GET /v1/models`, `GET /v1/models/{id}`. */
export const openAiRoutes: FastifyPluginAsyncZod<ServicesOptions> = async (app, { services }) => {
  const { registry, clock } = services;

  // Bodies are validated by the door itself, so a refusal names OpenAI's field (`param`).
  app.post('/v1/chat/completions', (req, reply) => {
    return answer(
      services,
      req,
      reply,
      chatCall(req.body, sessionIdFor(req.headers['x-session-id'], sessionUser(req.body))),
    );
  });
  app.post('/v1/completions', (req, reply) => {
    return answer(
      services,
      req,
      reply,
      completionCall(req.body, sessionIdFor(req.headers['x-session-id'], sessionUser(req.body))),
    );
  });

  app.get('/v1/models', { schema: { response: { 200: OpenAiModelListSchema } } }, async () => ({
    object: 'list' as const,
    data: listModels(
      registry.pools(),
      (ref) => registry.modelFirstSeen(ref),
      clock.now(),
      await services.catalog.list(),
    ),
  }));

  // Wildcard: model ids may hold slashes (`hf:org/repo/file.gguf`, `org/model`).
  app.get('/v1/models/*', async (req) => {
    const name = (req.params as { '*': string })['*'];
    const firstSeen = (ref: string): number | undefined => registry.modelFirstSeen(ref);
    const model =
      findModel(registry.poolsForModel(name), name, firstSeen, clock.now()) ??
      findModel([], name, firstSeen, clock.now(), await services.catalog.get(name));
    if (model === undefined) throw modelNotFound(name);
    return model;
  });
};

/** The body's `user`, when it is a string (the schema checks it properly later). */
function sessionUser(body: unknown): string | undefined {
  const user = (body as { user?: unknown } | null)?.user;
  return typeof user === 'string' ? user : undefined;
}
