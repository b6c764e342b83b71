import { z } from 'zod';
import {
  EmbeddingsRequestSchema,
  EmbeddingsResponseSchema,
  InfillRequestSchema,
  InfillResponseSchema,
  OpenAiErrorSchema,
  RerankRequestSchema,
  RerankResponseSchema,
} from '@llama-orch/contracts';
import type { RouteSpec } from './routes.js';

/** 401 without a valid credential; 403 with one whose role the route does not take. */
const withAuth = [401, 403];

/** llama-server's error shape, the body of `/rerank` and `/infill` errors. */
const LlamaCppErrorSchema = z
  .strictObject({ error: z.strictObject({ code: z.int(), message: z.string(), type: z.string() }) })
  .meta({ id: 'LlamaCppError' });
const doorErrors = [400, ...withAuth, 404, 413, 429, 500, 502, 503];
const engineRouteNote =
  'Placed only on pools that serve it (their capabilities); a model none of whose pools can is a 400.';

/**
 * The engine-route doors (issue 27): each request is a task through the same queue, placement, auth
 * and rate limits as /v1 chat, answered with the engine's own body (`model` set to the name asked for).
 */
export const ENGINE_DOORS: RouteSpec[] = [
  {
    method: 'post',
    path: '/v1/embeddings',
    summary: `Embeddings in OpenAI's shape (float or base64; \`dimensions\` is refused). ${engineRouteNote}`,
    auth: true,
    body: EmbeddingsRequestSchema,
    ok: { status: 200, schema: EmbeddingsResponseSchema },
    errors: doorErrors,
    errorSchema: OpenAiErrorSchema,
  },
  {
    method: 'post',
    path: '/v1/rerank',
    summary: `Rerank documents against a query, in llama-server's shape. ${engineRouteNote}`,
    auth: true,
    body: RerankRequestSchema,
    ok: { status: 200, schema: RerankResponseSchema },
    errors: doorErrors,
    errorSchema: OpenAiErrorSchema,
  },
  {
    method: 'post',
    path: '/rerank',
    summary: `Rerank (llama-server's alias of /v1/rerank; errors in llama-server's shape). ${engineRouteNote}`,
    auth: true,
    body: RerankRequestSchema,
    ok: { status: 200, schema: RerankResponseSchema },
    errors: doorErrors,
    errorSchema: LlamaCppErrorSchema,
  },
  {
    method: 'post',
    path: '/infill',
    summary: `Fill in the middle, in llama.cpp's shape, for models with FIM tokens. ${engineRouteNote}`,
    auth: true,
    body: InfillRequestSchema,
    ok: { status: 200, schema: InfillResponseSchema, description: "Without `stream`: the engine's answer." },
    alt: {
      status: 200,
      contentType: 'text/event-stream',
      schema: InfillResponseSchema,
      description:
        'With `stream: true`: `data: <json>` events as llama-server streams /infill (no `[DONE]`), the last with `stop: true`.',
    },
    errors: doorErrors,
    errorSchema: LlamaCppErrorSchema,
  },
];
