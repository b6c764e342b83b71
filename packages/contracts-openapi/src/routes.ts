import { z } from 'zod';
import {
  ResponsesRequestSchema,
  ResponseObjectSchema,
  ResponseDeletedSchema,
  ResponseInputItemListSchema,
  ResponseInputItemsQuerySchema,
  ResponseRetrieveQuerySchema,
  AdmissionResponseSchema,
  AvailabilitySchema,
  CapabilitiesSchema,
  CatalogLoadRequestSchema,
  CatalogRegisterRequestSchema,
  CatalogUnloadRequestSchema,
  ClusterModelListSchema,
  ClusterModelSchema,
  ClusterPoolListSchema,
  DrainRequestSchema,
  ErrorEnvelopeSchema,
  HeartbeatRequestSchema,
  NodeAckSchema,
  NodeListSchema,
  NodeRegisterRequestSchema,
  PoolHealthSchema,
  PoolOperationResponseSchema,
  ReloadRequestSchema,
  SessionInfoSchema,
  SSE_EVENTS,
  SseFrameSchema,
  TaskRequestSchema,
  TaskInfoSchema,
  TaskListSchema,
  TaskListQuerySchema,
  ChatCompletionRequestSchema,
  ChatCompletionSchema,
  ChatCompletionChunkSchema,
  CompletionRequestSchema,
  CompletionSchema,
  OpenAiErrorSchema,
  OpenAiModelListSchema,
  OpenAiModelSchema,
  LivenessSchema,
  ReadinessSchema,
  DashboardSnapshotSchema,
} from '@llama-orch/contracts';

/** One HTTP route of a service, described once for the generated OpenAPI documents. */
export interface RouteSpec {
  method: 'get' | 'post' | 'delete';
  /** OpenAPI path template (`{id}` parameters). */
  path: string;
  summary: string;
  /** Longer prose: who may call it, what it sees. */
  description?: string;
  /** false for the routes that never need the Bearer token. */
  auth: boolean;
  params?: z.ZodObject;
  query?: z.ZodObject;
  body?: z.ZodType;
  /** The body may be left out altogether (`requestBody.required: false`). @default false */
  bodyOptional?: boolean;
  /** Success status → JSON schema, or a content type with a description for streams. */
  ok: { status: number; schema?: z.ZodType; contentType?: string; description?: string };
  /**
   * Another success answer chosen by the request: by content negotiation (a stream instead of JSON),
   * or by what the request finds (200 for an update where `ok` is the 201 of a create).
   */
  alt?: { status: number; schema: z.ZodType; contentType: string; description: string };
  /** Error statuses the route can answer with an ErrorEnvelope (or `errorSchema`). */
  errors: number[];
  /** Body of the error answers. @default ErrorEnvelope */
  errorSchema?: z.ZodType;
  /** What an error status means on this route (its codes and causes), instead of the generic text. */
  errorText?: Partial<Record<number, string>>;
}

export const id = z.strictObject({ id: z.string().meta({ description: 'Identifier from the path.' }) });
/** 401 without a valid credential; 403 with one whose role the route does not take (a client key on a node route). */
export const withAuth = [401, 403];
/** pool-managerd has one credential (the node token): no role to refuse. */
export const nodeAuth = [401];

const sseDescription = [
  'Server-Sent Events. Frames `id: <seq>\\nevent: <name>\\ndata: <json>\\n\\n`.',
  'Order: started → metrics* → token* → metrics* → exactly one of end | error.',
  `Each frame is \`{event, data}\` below, event one of ${Object.keys(SSE_EVENTS).join(', ')}.`,
  'A `: keep-alive` comment is sent at least every 15 s. `Last-Event-ID` resumes after that frame.',
].join(' ');

/** Who may reach a task or session (with keys configured; with none, everything is open). */
const ownerOnly = (what: string) =>
  `${what} belongs to the key that admitted it: that key and operator keys may call this; any other client key gets 404 NOT_FOUND, exactly as for an unknown id (no 403: ids are not disclosed).`;
const sessionOwner = [
  "A session is the key's own: the same id (v2 `session_id`, v1 `X-Session-Id` or `user`) under another key is another session.",
  "An operator key names a client key's session with `?key=<name>` (without it, its own); a client key's `key` is ignored.",
].join(' ');
const sessionQuery = z.strictObject({
  key: z.string().optional().meta({
    description: "Operator keys only: the name of the key whose session this is. @default the caller's own key",
  }),
});

/** Client-facing task API of orchestratord. */
export const DATA_PLANE: RouteSpec[] = [
  {
    method: 'post',
    path: '/v2/tasks',
    summary: 'Admit a task (only model_ref and prompt or messages are required)',
    auth: true,
    body: TaskRequestSchema,
    ok: { status: 202, schema: AdmissionResponseSchema },
    alt: {
      status: 200,
      contentType: 'text/event-stream',
      schema: SseFrameSchema,
      description: `With \`Accept: text/event-stream\`: the task's event stream in this response instead of the 202 (the frames of GET /v2/tasks/{id}/events). ${sseDescription}`,
    },
    errors: [400, ...withAuth, 404, 413, 429, 502, 503],
  },
  {
    method: 'get',
    path: '/v2/tasks',
    summary: 'List tasks, newest first (filters and cursor paging)',
    description:
      'Records of queued, running and ended tasks, kept `ORCHD_TASK_RETENTION_MS` after their end and at most `ORCHD_TASK_RETENTION_COUNT`; cluster-wide with replicas. A client key lists only the tasks it admitted; an operator key every task.',
    auth: true,
    query: TaskListQuerySchema,
    ok: { status: 200, schema: TaskListSchema },
    errors: [400, ...withAuth],
  },
  {
    method: 'get',
    path: '/v2/tasks/{id}',
    summary: "A task's record: state, queue position, placement, outcome, usage, timings",
    description: `${ownerOnly('The task')} Kept \`ORCHD_TASK_RETENTION_MS\` after the task ends.`,
    auth: true,
    params: id,
    ok: { status: 200, schema: TaskInfoSchema },
    errors: [...withAuth, 404],
  },
  {
    method: 'get',
    path: '/v2/tasks/{id}/events',
    summary: "Stream a task's events",
    description: ownerOnly('The task'),
    auth: true,
    params: id,
    query: z.strictObject({ verbose: z.enum(['true', 'false']).optional(), last_event_id: z.string().optional() }),
    ok: { status: 200, contentType: 'text/event-stream', schema: SseFrameSchema, description: sseDescription },
    errors: [...withAuth, 404],
  },
  {
    method: 'post',
    path: '/v2/tasks/{id}/cancel',
    summary: 'Cancel a task (idempotent)',
    description: ownerOnly('The task'),
    auth: true,
    params: id,
    ok: { status: 204 },
    errors: [...withAuth, 404],
  },
  {
    method: 'get',
    path: '/v2/sessions/{id}',
    summary: 'Session budget and turns',
    description: sessionOwner,
    auth: true,
    params: id,
    query: sessionQuery,
    ok: { status: 200, schema: SessionInfoSchema },
    errors: [...withAuth, 404],
  },
  {
    method: 'delete',
    path: '/v2/sessions/{id}',
    summary: 'Forget a session',
    description: sessionOwner,
    auth: true,
    params: id,
    query: sessionQuery,
    ok: { status: 204 },
    errors: [...withAuth, 404],
  },
];

const openAiStream = [
  'With `stream: true`: Server-Sent Events, each `data: <one chunk as JSON>` (the schema below), then `data: [DONE]`.',
  'A chat stream opens with a role chunk (`delta: {role: assistant, content: null}`), then content chunks, a finish chunk',
  '(`finish_reason`), and with `stream_options.include_usage` a last chunk with `choices: []` and `usage`.',
  'The 200 is sent with the first token; a failure before it is an error response, after it a last `data: {"error": …}` event.',
].join(' ');
const modelId = z.strictObject({
  id: z.string().meta({ description: 'Alias, catalog id or model ref (may contain `/`).' }),
});
const responseId = z.strictObject({
  id: z.string().meta({ description: 'The response id (`resp_…`).' }),
});
const openAiErrors = { errors: [400, ...withAuth, 404, 413, 429, 500, 502, 503], errorSchema: OpenAiErrorSchema };

/** The OpenAI-compatible door of orchestratord (`/v1`): the same queue, placement and auth as /v2 tasks. */
export const OPENAI: RouteSpec[] = [
  {
    method: 'post',
    path: '/v1/chat/completions',
    summary: "Chat completion (messages rendered with the model's template by the engine)",
    auth: true,
    body: ChatCompletionRequestSchema,
    ok: { status: 200, schema: ChatCompletionSchema, description: 'Without `stream`: one chat.completion.' },
    alt: {
      status: 200,
      contentType: 'text/event-stream',
      schema: ChatCompletionChunkSchema,
      description: openAiStream,
    },
    ...openAiErrors,
  },
  {
    method: 'post',
    path: '/v1/completions',
    summary: 'Text completion (the prompt sent verbatim)',
    auth: true,
    body: CompletionRequestSchema,
    ok: { status: 200, schema: CompletionSchema, description: 'Without `stream`: one text_completion.' },
    alt: { status: 200, contentType: 'text/event-stream', schema: CompletionSchema, description: openAiStream },
    ...openAiErrors,
  },
  {
    method: 'post',
    path: '/v1/responses',
    summary:
      'OpenAI Responses (translated to a chat task): stored by default, continued with previous_response_id, or run in the background',
    description:
      "A stored response (`store` not false) is kept ORCHD_TASK_RETENTION_MS (at most ORCHD_TASK_RETENTION_COUNT), readable by the key that created it and operator keys. `previous_response_id` puts that response's conversation and output before `input` (its instructions are not carried over) and keeps the chain in one session; an unknown, expired, deleted or other key's id is a 404 `previous_response_not_found`. `background: true` (needs `store`) answers at once with `status: queued`; poll, stream or cancel it under `/v1/responses/{id}`. `conversation`, stored prompts and non-function tools are refused with 400.",
    auth: true,
    body: ResponsesRequestSchema,
    ok: {
      status: 200,
      schema: ResponseObjectSchema,
      description:
        'Without `stream`: one response (`status: incomplete` when max_output_tokens cut it; `queued` for a background one).',
    },
    alt: {
      status: 200,
      contentType: 'text/event-stream',
      schema: ResponseObjectSchema,
      description:
        "With `stream: true`: `event: <type>` + `data: <json>` events with `sequence_number`: response.created, response.in_progress, per output item output_item.added, its deltas (output_text, function_call_arguments, reasoning_text) and done events, then response.completed or response.incomplete carrying the response (schema below). A stateless response's failure after the first event is one `error` event; a stored one ends with response.failed (or response.cancelled). A background one opens with response.created and response.queued (status queued).",
    },
    ...openAiErrors,
  },
  {
    method: 'get',
    path: '/v1/responses/{id}',
    summary: 'A stored response: queued, in_progress (with its output so far), or as it ended',
    description:
      'Only the key that created it and operator keys see it; for any other key it is the 404 of an unknown id. With `stream=true` (a background response only): its events from the start, live while it runs, from its record once it ended, the same events with the same `sequence_number`s through any replica; `starting_after=<n>` sends only the later ones (a reconnect resumes).',
    auth: true,
    params: responseId,
    query: ResponseRetrieveQuerySchema,
    ok: { status: 200, schema: ResponseObjectSchema },
    alt: {
      status: 200,
      contentType: 'text/event-stream',
      schema: ResponseObjectSchema,
      description: "With `stream=true`: the background response's events, as `POST /v1/responses` streams them.",
    },
    errors: [400, ...withAuth, 404, 500, 503],
    errorSchema: OpenAiErrorSchema,
  },
  {
    method: 'delete',
    path: '/v1/responses/{id}',
    summary: 'Deletes a stored response (a background one still running here is cancelled)',
    auth: true,
    params: responseId,
    ok: { status: 200, schema: ResponseDeletedSchema },
    errors: [...withAuth, 404, 503],
    errorSchema: OpenAiErrorSchema,
  },
  {
    method: 'get',
    path: '/v1/responses/{id}/input_items',
    summary: "A page of a stored response's input items (OpenAI's list: first_id, last_id, has_more)",
    auth: true,
    params: responseId,
    query: ResponseInputItemsQuerySchema,
    ok: { status: 200, schema: ResponseInputItemListSchema },
    errors: [400, ...withAuth, 404, 503],
    errorSchema: OpenAiErrorSchema,
  },
  {
    method: 'post',
    path: '/v1/responses/{id}/cancel',
    summary: 'Cancels a background response; answers it as it ended (`status: cancelled`, or how it ended before)',
    auth: true,
    params: responseId,
    ok: { status: 200, schema: ResponseObjectSchema },
    errors: [400, ...withAuth, 404, 500, 503],
    errorSchema: OpenAiErrorSchema,
    errorText: { 400: 'The response was not created with `background: true`.' },
  },
  {
    method: 'get',
    path: '/v1/models',
    summary: 'Models the ready and provisioning pools serve',
    auth: true,
    ok: { status: 200, schema: OpenAiModelListSchema },
    errors: withAuth,
    errorSchema: OpenAiErrorSchema,
  },
  {
    method: 'get',
    path: '/v1/models/{id}',
    summary: 'One model, by alias, catalog id or ref',
    auth: true,
    params: modelId,
    ok: { status: 200, schema: OpenAiModelSchema },
    errors: [...withAuth, 404],
    errorSchema: OpenAiErrorSchema,
  },
];

/** Probes: no auth (load balancers, kubelets and watchdogs carry no token), answered from memory. */
export function probes(readiness: z.ZodType, readyText: string): RouteSpec[] {
  return [
    {
      method: 'get',
      path: '/healthz',
      summary: 'Liveness: the process serves (no auth)',
      auth: false,
      ok: { status: 200, schema: LivenessSchema },
      errors: [],
    },
    {
      method: 'get',
      path: '/readyz',
      summary: `Readiness: ${readyText} (no auth)`,
      auth: false,
      ok: { status: 200, schema: readiness, description: 'Ready.' },
      alt: {
        status: 503,
        contentType: 'application/json',
        schema: readiness,
        description: 'Not ready (`reason` says why); `Retry-After: 1`.',
      },
      errors: [],
    },
  ];
}

/** What every daemon says about itself, without auth: its metrics and this document. */
export const selfDescription: RouteSpec[] = [
  {
    method: 'get',
    path: '/metrics',
    summary: 'Prometheus metrics (no auth)',
    auth: false,
    ok: { status: 200, contentType: 'text/plain; version=0.0.4', description: 'Prometheus text format.' },
    errors: [],
  },
  {
    method: 'get',
    path: '/openapi.json',
    summary: 'This OpenAPI document (no auth: documentation is not a secret)',
    auth: false,
    ok: {
      status: 200,
      contentType: 'application/json',
      description: 'OpenAPI 3.1, generated from packages/contracts.',
    },
    errors: [],
  },
];

/** `{id}` of the catalog routes: a model's ref or one of its aliases. */
const catalogModelId = z.strictObject({
  id: z.string().meta({
    description:
      "The model: its ref, URL-encoded (`hf%3Aorg%2Frepo%2Fm.gguf`), or one of its aliases (a static pool's model by any name it lists).",
  }),
});
const catalogOperators = 'Operator keys only when keys are configured: a client key gets 403 FORBIDDEN.';
const modelNotFound = 'No catalog entry and no pool has this name (MODEL_NOT_FOUND)';
const shuttingDown = 'orchestratord is shutting down; nothing is loaded or unloaded (INTERNAL, retriable)';

/**
 * The fleet catalog (.specs/67-models-on-demand.md): models served on demand with their aliases and
 * policy, each listed once with the models static pools serve; loads and unloads of their copies.
 */
const CATALOG: RouteSpec[] = [
  {
    method: 'get',
    path: '/v2/catalog/models',
    summary: 'Every model once: catalog entries and the models static pools serve, sorted by id',
    auth: true,
    ok: { status: 200, schema: ClusterModelListSchema },
    errors: withAuth,
  },
  {
    method: 'post',
    path: '/v2/catalog/models',
    summary: 'Register a model served on demand, with its aliases and policy (or replace its entry)',
    description: [
      'A registration states the whole entry: registering a ref again replaces its digest, aliases and policy (fields left out take their defaults) and keeps when it was first registered, its last load error and its load claim.',
      "The ref and every alias are the entry's names; a name belongs to one entry only. The first request for one of its names loads a copy where it fits.",
      catalogOperators,
    ].join(' '),
    auth: true,
    body: CatalogRegisterRequestSchema,
    ok: { status: 201, schema: ClusterModelSchema, description: 'Registered: a new entry.' },
    alt: {
      status: 200,
      contentType: 'application/json',
      schema: ClusterModelSchema,
      description: 'Updated: the ref was registered already and its entry is replaced.',
    },
    errors: [400, ...withAuth, 409],
    errorText: {
      409: 'The ref or an alias is a name of another catalog entry, or a name a static pool serves as another model (CONFLICT)',
    },
  },
  {
    method: 'get',
    path: '/v2/catalog/models/{id}',
    summary: 'One model, by ref or alias',
    auth: true,
    params: catalogModelId,
    ok: { status: 200, schema: ClusterModelSchema },
    errors: [...withAuth, 404],
    errorText: { 404: modelNotFound },
  },
  {
    method: 'delete',
    path: '/v2/catalog/models/{id}',
    summary: 'Remove a model from the catalog, by ref or alias (its loaded copies keep serving)',
    description: catalogOperators,
    auth: true,
    params: catalogModelId,
    ok: { status: 204, description: 'Removed.' },
    errors: [...withAuth, 404],
    errorText: {
      404: `${modelNotFound}, or NOT_FOUND for a model only a node's config serves (managed on the node)`,
    },
  },
  {
    method: 'post',
    path: '/v2/catalog/models/{id}/load',
    summary: 'Load one more copy of a catalog model (on `node`, else on the node with the most room)',
    description: [
      'A load already in flight (a copy provisioning or starting, or a live load claim on any replica) answers 202 without asking anyone.',
      'Nodes that report on-demand memory are asked in turn, most room first; a node that refuses is skipped. Without `node`, when no node has room, one idle copy of a model of no higher priority may be evicted at a time (never a busy, loading or pinned one). The model is `loading` in the answer.',
      catalogOperators,
    ].join(' '),
    auth: true,
    params: catalogModelId,
    body: CatalogLoadRequestSchema,
    bodyOptional: true,
    ok: { status: 202, schema: ClusterModelSchema, description: 'The load started or is already under way.' },
    errors: [400, ...withAuth, 404, 409, 500, 502, 503],
    errorText: {
      404: `${modelNotFound}; or \`node\` is not registered (NOT_FOUND)`,
      409: 'Static pools serve the name but it is not a catalog entry (register it first), `max_loaded` copies are loaded, or `node` loads no model on request (CONFLICT)',
      500: shuttingDown,
      502: 'Every node asked refused or could not be reached, not all for memory; the message names each reason (MODEL_LOAD_FAILED)',
      503: 'No node has room for the model and no idle copy may be evicted for it, or no online node loads models on request (INSUFFICIENT_MEMORY); `node` is not online (POOL_UNAVAILABLE). Retry-After and X-Backoff-Ms set',
    },
  },
  {
    method: 'post',
    path: '/v2/catalog/models/{id}/unload',
    summary: 'Unload the copies of a model loaded on demand (on `node`, else on every node), never below its pin',
    description: [
      'Failed copies always go; of the live ones, idle copies first (longest idle first), then loading, then busy ones, as many as leave `pin` copies (static pools count).',
      'Each node drains its copy (in-flight work may run `deadline_ms`) and removes it; static pools are never unloaded.',
      catalogOperators,
    ].join(' '),
    auth: true,
    params: catalogModelId,
    body: CatalogUnloadRequestSchema,
    bodyOptional: true,
    ok: { status: 202, schema: ClusterModelSchema, description: 'At least one copy is draining.' },
    errors: [400, ...withAuth, 404, 409, 500, 503],
    errorText: {
      404: modelNotFound,
      409: 'Only static pools serve the model, no copy loaded on demand is left, the pin leaves nothing to unload, or a node refused with CONFLICT (CONFLICT)',
      500: shuttingDown,
      503: 'Every node asked refused or could not be reached (POOL_UNAVAILABLE); Retry-After and X-Backoff-Ms set',
    },
  },
  {
    method: 'get',
    path: '/v2/catalog/availability',
    summary: 'Where each model is served: its ready and provisioning pools',
    auth: true,
    ok: { status: 200, schema: AvailabilitySchema },
    errors: withAuth,
  },
];

/** Every tenant's recent tasks are on the dashboard: with keys configured, its data is an operator's. */
const dashboardOperators =
  "Operator keys only when keys are configured (every tenant's recent tasks are on it): a client key gets 403 FORBIDDEN.";

/** Operator API of orchestratord. */
export const CONTROL_PLANE: RouteSpec[] = [
  ...probes(ReadinessSchema, 'able to admit tasks (listening, not shutting down); 503 otherwise'),
  {
    method: 'get',
    path: '/v2/meta/capabilities',
    summary: 'What the cluster serves now',
    auth: true,
    ok: { status: 200, schema: CapabilitiesSchema },
    errors: withAuth,
  },
  {
    method: 'get',
    path: '/v2/pools',
    summary: 'All pools of all nodes',
    auth: true,
    ok: { status: 200, schema: ClusterPoolListSchema },
    errors: withAuth,
  },
  {
    method: 'get',
    path: '/v2/pools/{id}/health',
    summary: 'Health of one pool',
    auth: true,
    params: id,
    ok: { status: 200, schema: PoolHealthSchema },
    errors: [...withAuth, 404],
  },
  {
    method: 'post',
    path: '/v2/pools/{id}/drain',
    summary: 'Drain a pool (forwarded to its node)',
    auth: true,
    params: id,
    body: DrainRequestSchema,
    ok: { status: 202, schema: PoolOperationResponseSchema },
    errors: [400, ...withAuth, 404, 502, 503],
  },
  {
    method: 'post',
    path: '/v2/pools/{id}/reload',
    summary: 'Reload a pool with another model (forwarded)',
    auth: true,
    params: id,
    body: ReloadRequestSchema,
    ok: { status: 202, schema: PoolOperationResponseSchema },
    errors: [400, ...withAuth, 404, 502, 503],
  },
  ...CATALOG,
  {
    method: 'get',
    path: '/v2/dashboard',
    summary: 'What the web dashboard shows: nodes, pools, the queue, throughput, recent tasks',
    description: dashboardOperators,
    auth: true,
    ok: { status: 200, schema: DashboardSnapshotSchema },
    errors: withAuth,
  },
  {
    method: 'get',
    path: '/v2/dashboard/events',
    summary: 'The dashboard snapshot, pushed whenever the cluster changes',
    description: dashboardOperators,
    auth: true,
    ok: {
      status: 200,
      contentType: 'text/event-stream',
      schema: DashboardSnapshotSchema,
      description: [
        'Server-Sent Events: `event: snapshot` + `data: <DashboardSnapshot as JSON>` on connect and after each change of the registry or',
        'of a task (coalesced: at most about 4 per second) and at the end of each throughput bucket. No ids: a reconnect gets a fresh snapshot.',
        'A `: keep-alive` comment is sent at least every 15 s. The stream ends when the server shuts down.',
      ].join(' '),
    },
    errors: withAuth,
  },
  {
    method: 'get',
    path: '/',
    summary: 'The web dashboard page (no auth: the page asks for a key; its files are under /dashboard/)',
    auth: false,
    ok: {
      status: 200,
      contentType: 'text/html',
      description:
        "The page's index.html (`Cache-Control: no-cache`); its scripts and styles are served under /dashboard/ (hashed names, cached for a year).",
    },
    errors: [500],
  },
  ...selfDescription,
  {
    method: 'get',
    path: '/docs',
    summary: 'API reference page (Swagger UI over /openapi.json, assets served locally; no auth)',
    auth: false,
    ok: {
      status: 200,
      contentType: 'text/html',
      description: 'HTML page; its scripts and styles are served under /docs/static/.',
    },
    errors: [],
  },
];

/** Node registry API of orchestratord, used by pool-managerd. */
export const NODES: RouteSpec[] = [
  {
    method: 'post',
    path: '/v2/nodes/register',
    summary: 'Register (or re-register) a node',
    auth: true,
    body: NodeRegisterRequestSchema,
    ok: { status: 200, schema: NodeAckSchema },
    errors: [400, ...withAuth],
  },
  {
    method: 'post',
    path: '/v2/nodes/{id}/heartbeat',
    summary: 'Report pool state; 404 means register again',
    auth: true,
    params: id,
    body: HeartbeatRequestSchema,
    ok: { status: 200, schema: NodeAckSchema },
    errors: [400, ...withAuth, 404],
  },
  {
    method: 'delete',
    path: '/v2/nodes/{id}',
    summary: 'Deregister a node',
    auth: true,
    params: id,
    ok: { status: 204 },
    errors: [...withAuth, 404],
  },
  {
    method: 'get',
    path: '/v2/nodes',
    summary: 'Registered nodes',
    auth: true,
    ok: { status: 200, schema: NodeListSchema },
    errors: withAuth,
  },
];

export const ERROR_RESPONSE_SCHEMA = ErrorEnvelopeSchema;
