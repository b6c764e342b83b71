import { OpenAPIRegistry, OpenApiGeneratorV31 } from '@asteasolutions/zod-to-openapi';
import type { z } from 'zod';
import { stringify } from 'yaml';
import { ANTHROPIC } from './anthropic-routes.js';
import { POOL_MANAGER } from './pool-manager-routes.js';
import { CONTROL_PLANE, DATA_PLANE, ERROR_RESPONSE_SCHEMA, NODES, OPENAI, type RouteSpec } from './routes.js';
import { ENGINE_DOORS } from './engine-door-routes.js';

interface DocumentSpec {
  file: string;
  title: string;
  description: string;
  routes: RouteSpec[];
}

const STATUS_TEXT: Record<number, string> = {
  400: 'Invalid request (INVALID_PARAMS, DEADLINE_UNMET)',
  401: 'Missing or wrong Bearer token (UNAUTHORIZED)',
  403: 'A valid credential of the wrong role: a client key on a node or operator route, the node token on a client route (FORBIDDEN)',
  404: 'Unknown resource (NOT_FOUND)',
  409: 'Conflicts with the current state (CONFLICT)',
  413: 'Body over the limit (PAYLOAD_TOO_LARGE)',
  429: 'Queue full (ADMISSION_REJECT, QUEUE_FULL_DROP_LRU), or the key is over its rate limit (ADMISSION_REJECT, policy_label rate_limit); Retry-After and X-Backoff-Ms set',
  500: 'Failed while running (DECODE_TIMEOUT, INTERNAL)',
  502: 'Upstream node failed (WORKER_RESET)',
  503: 'Not available now (POOL_UNREADY, POOL_UNAVAILABLE, MODEL_NOT_AVAILABLE, REPLICA_EXHAUSTED, STORE_UNAVAILABLE); Retry-After and X-Backoff-Ms set',
};

export const DOCUMENTS: readonly DocumentSpec[] = [
  {
    file: 'data-plane.yaml',
    title: 'llama-orch orchestratord — data plane',
    description:
      'Task admission, SSE token streams, cancel, sessions. With keys configured a task and its session belong to the key that admitted it: only that key and operator keys see them; another client key gets the 404 of an unknown id.',
    routes: DATA_PLANE,
  },
  {
    file: 'openai.yaml',
    title: 'llama-orch orchestratord — OpenAI-compatible door',
    description:
      'POST /v1/chat/completions, /v1/completions, /v1/responses (stateless subset), GET /v1/models: OpenAI clients work unchanged; admitted through the same queue, placement, auth and deadlines as /v2 tasks. Errors are `{error: {message, type, param, code}}` with the ErrorEnvelope statuses (404 `model_not_found`; 429/503 with Retry-After).',
    routes: OPENAI,
  },
  {
    file: 'anthropic.yaml',
    title: 'llama-orch orchestratord — Anthropic Messages door',
    description:
      "POST /v1/messages and /v1/messages/count_tokens in Anthropic's shape: Anthropic clients work unchanged with the same keys (`x-api-key` or Bearer); each request is a chat task through the same queue, placement and deadlines. Errors are `{type: 'error', error: {type, message}}` with the ErrorEnvelope statuses.",
    routes: ANTHROPIC,
  },
  {
    file: 'engine-doors.yaml',
    title: 'llama-orch orchestratord — engine-route doors',
    description:
      "POST /v1/embeddings (OpenAI's shape), /v1/rerank and /rerank, /infill (llama-server's shapes): the engine's own routes through the same queue, placement by pool capability, auth and rate limits as /v1 chat. Errors: OpenAI's shape under /v1, llama-server's `{error: {code, message, type}}` on /rerank and /infill.",
    routes: ENGINE_DOORS,
  },
  {
    file: 'control-plane.yaml',
    title: 'llama-orch orchestratord — control plane',
    description: 'Capabilities, pools, drain/reload, catalog, metrics.',
    routes: CONTROL_PLANE,
  },
  {
    file: 'nodes.yaml',
    title: 'llama-orch orchestratord — node registry',
    description: 'Registration and heartbeats from pool-managerd.',
    routes: NODES,
  },
  {
    file: 'pool-managerd.yaml',
    title: 'llama-orch pool-managerd',
    description:
      'GPU-node daemon: pools, loads on request and their unload, drain/reload, dispatch of one completion, metrics.',
    routes: POOL_MANAGER,
  },
];

/** A document's routes, tagged when a served document merges several. */
interface Section {
  tag?: string;
  routes: RouteSpec[];
}

function buildDocument(spec: Pick<DocumentSpec, 'title' | 'description'>, sections: readonly Section[]): object {
  const registry = new OpenAPIRegistry();
  registry.registerComponent('securitySchemes', 'bearer', { type: 'http', scheme: 'bearer' });
  // schemas carrying a zod `.meta({ id })` become components wherever a route references them
  for (const { tag, routes } of sections)
    for (const r of routes) {
      const responses: Record<string, { description: string; content?: Record<string, { schema: z.ZodType }> }> = {};
      const okContentType = r.ok.contentType ?? 'application/json';
      // streams and text bodies without a schema are described in prose only
      responses[String(r.ok.status)] = {
        description: r.ok.description ?? 'Success',
        ...(r.ok.schema ? { content: { [okContentType]: { schema: r.ok.schema } } } : {}),
      };
      // A negotiated alternative (a stream instead of JSON): another content type of its status.
      if (r.alt !== undefined) {
        const at = String(r.alt.status);
        const existing = responses[at];
        const content = { ...(existing?.content ?? {}), [r.alt.contentType]: { schema: r.alt.schema } };
        responses[at] = {
          description: existing === undefined ? r.alt.description : `${existing.description} ${r.alt.description}`,
          content,
        };
      }
      for (const status of r.errors) {
        responses[String(status)] = {
          description: r.errorText?.[status] ?? STATUS_TEXT[status] ?? 'Error',
          content: { 'application/json': { schema: r.errorSchema ?? ERROR_RESPONSE_SCHEMA } },
        };
      }
      registry.registerPath({
        method: r.method,
        path: r.path,
        summary: r.summary,
        ...(r.description !== undefined ? { description: r.description } : {}),
        ...(tag !== undefined ? { tags: [tag] } : {}),
        security: r.auth ? [{ bearer: [] }] : [],
        request: {
          ...(r.params ? { params: r.params } : {}),
          ...(r.query ? { query: r.query } : {}),
          ...(r.body
            ? { body: { required: r.bodyOptional !== true, content: { 'application/json': { schema: r.body } } } }
            : {}),
        },
        responses,
      });
    }
  const generator = new OpenApiGeneratorV31(registry.definitions);
  return generator.generateDocument({
    openapi: '3.1.0',
    info: {
      title: spec.title,
      version: '2.0.0',
      description: `${spec.description} Generated from packages/contracts; do not edit.`,
    },
  });
}

/** The generated OpenAPI documents as YAML text, by file name. */
export function renderOpenApi(): Map<string, string> {
  const out = new Map<string, string>();
  for (const spec of DOCUMENTS)
    out.set(
      spec.file,
      stringify(buildDocument(spec, [{ routes: spec.routes }]), { lineWidth: 0, aliasDuplicateObjects: false }),
    );
  return out;
}

/** One daemon's served document: where the daemon imports it from (repo-relative) and what it merges. */
interface ServedSpec {
  path: string;
  title: string;
  description: string;
  docs: readonly string[];
}

/**
 * The documents the daemons serve at `GET /openapi.json`, generated beside their code (JSON, imported
 * at build time: no file read at run time, no network): orchestratord's merges its four documents,
 * each route tagged with its document's title; pool-managerd's is its own.
 */
const SERVED: readonly ServedSpec[] = [
  {
    path: 'apps/orchestratord/src/http/openapi.json',
    title: 'llama-orch orchestratord',
    description:
      'Every route of orchestratord: the /v2 data plane, the OpenAI-compatible /v1 door, the Anthropic door, the engine-route doors, the control plane and the node registry.',
    docs: ['data-plane.yaml', 'openai.yaml', 'anthropic.yaml', 'engine-doors.yaml', 'control-plane.yaml', 'nodes.yaml'],
  },
  {
    path: 'apps/pool-managerd/src/http/openapi.json',
    title: 'llama-orch pool-managerd',
    description:
      'GPU-node daemon: pools, loads on request and their unload, drain/reload, dispatch of one completion, metrics.',
    docs: ['pool-managerd.yaml'],
  },
];

/** The served OpenAPI documents as JSON text, by repo-relative path. */
export function renderServedDocuments(): Map<string, string> {
  const out = new Map<string, string>();
  for (const served of SERVED) {
    const sections = served.docs.map((file) => {
      const doc = DOCUMENTS.find((d) => d.file === file);
      if (doc === undefined) throw new Error(`no document ${file}`);
      return { tag: doc.title.replace(/^llama-orch orchestratord — /, ''), routes: doc.routes };
    });
    const single = sections.length === 1 ? [{ routes: sections[0]?.routes ?? [] }] : sections;
    out.set(served.path, `${JSON.stringify(buildDocument(served, single), null, 1)}\n`);
  }
  return out;
}
