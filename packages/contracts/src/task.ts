import { z } from 'zod';
import { EngineKindSchema, PoolIdSchema } from './common.js';
import { ChatMessagesSchema, SamplingSchema } from './sampling.js';
import type { EngineCall } from './engine-calls.js';

/**
 * Absolute caps enforced by the schema; orchestratord narrows `ctx` further to its live `ctx_max`.
 * `defaultMaxTokens` applies when a request names no `max_tokens` (both doors).
 */
export const TASK_LIMITS = Object.freeze({ ctxMax: 1_048_576, maxTokensMax: 32_768, promptMaxChars: 1_000_000, defaultMaxTokens: 1024 });

/** How a client steers placement. */
export const PlacementOverridesSchema = z
  .strictObject({
    /** `pin`: only `pin_pool_id`; `prefer`: try `prefer_pools` first; `auto`: the strategy decides. */
    mode: z.enum(['pin', 'prefer', 'auto']).default('auto'),
    /** Pool that a `pin` task must run on. Required when mode is `pin`. */
    pin_pool_id: PoolIdSchema.optional(),
    /** Pools tried first, in order, when mode is `prefer`. */
    prefer_pools: z.array(PoolIdSchema).max(64).optional(),
    /** Pools never used for this task. */
    avoid_pools: z.array(PoolIdSchema).max(64).optional(),
    /** With `prefer`: whether other pools may be used when the preferred are busy. @default true */
    allow_fallback: z.boolean().default(true),
  })
  .refine((p) => p.mode !== 'pin' || p.pin_pool_id !== undefined, {
    message: 'pin_pool_id is required when mode is pin',
    path: ['pin_pool_id'],
  })
  .meta({ id: 'PlacementOverrides' });
export type PlacementOverrides = z.infer<typeof PlacementOverridesSchema>;

/**
 * Body of `POST /v2/tasks`. Unknown fields are rejected. Only the model and the input (`prompt`, or
 * `messages` with `workload: "chat"`) are required; everything else has a documented default, and
 * orchestratord fills the ids and limits in (`TaskRequest` is the filled-in form).
 */
export const TaskRequestSchema = z
  .strictObject({
    /** Client-generated id; the task is addressed by it afterwards. @default a new UUID */
    task_id: z.uuid().optional(),
    /**
     * Conversation the task belongs to: budgets and turns are counted per session, and its turns
     * prefer the pool that holds its prompt cache. @default a new UUID (a one-turn session)
     */
    session_id: z.uuid().optional(),
    /** `completion` (raw `prompt`) or `chat` (`messages`, rendered with the model's chat template). */
    workload: z.enum(['completion', 'chat']).default('completion'),
    /** Model reference as the pools know it (alias, catalog id or ref, e.g. `synthetic:llama`). */
    model_ref: z.string().min(1).max(512),
    /** Engine that must serve the task. */
    engine: EngineKindSchema.default('llamacpp'),
    /** Context tokens the task needs; 0 = the pool's default. Checked against `ctx_max`. */
    ctx: z.int().min(0).max(TASK_LIMITS.ctxMax).default(0),
    /** Lane: `interactive` is always dequeued before `batch`. */
    priority: z.enum(['interactive', 'batch']).default('interactive'),
    /** Sampling seed; with greedy sampling and one slot, the same seed gives the same bytes. */
    seed: z.int().min(0).max(0xffff_ffff).optional(),
    /**
     * `strict` places only on pools running the determinism profile (one slot, no continuous
     * batching), samples greedily and bypasses the prompt cache.
     */
    determinism: z.enum(['strict', 'best_effort']).optional(),
    /** Version label of the sampler profile the client expects (informational). */
    sampler_profile_version: z.string().max(64).optional(),
    /** Prompt text sent to the engine verbatim (`workload: "completion"`). */
    prompt: z.string().max(TASK_LIMITS.promptMaxChars).optional(),
    /** The conversation so far (`workload: "chat"`). */
    messages: ChatMessagesSchema.optional(),
    /** Sampling and output controls (temperature, top_p, stop, response_format …). */
    sampling: SamplingSchema.optional(),
    /** Maximum tokens to generate (engine `n_predict`). @default 1024 */
    max_tokens: z.int().min(1).max(TASK_LIMITS.maxTokensMax).optional(),
    /** Time budget from admission to the end of the stream, milliseconds. @default orchestratord's `ORCHD_DEFAULT_DEADLINE_MS` */
    deadline_ms: z.int().positive().max(86_400_000).optional(),
    /** Client's estimate of tokens out, used for predictions only. */
    expected_tokens: z.int().min(0).max(TASK_LIMITS.maxTokensMax).optional(),
    /** Hint that KV cache reuse is worthwhile (`reuse`) or not (`cold`). */
    kv_hint: z.enum(['reuse', 'cold']).optional(),
    /** Placement steering; absent = `auto`. */
    placement: PlacementOverridesSchema.optional(),
  })
  .superRefine((r, ctx) => {
    if (r.workload === 'chat') {
      if (r.messages === undefined) ctx.addIssue({ code: 'custom', message: 'messages is required when workload is chat', path: ['messages'] });
      if (r.prompt !== undefined) ctx.addIssue({ code: 'custom', message: 'prompt is not allowed when workload is chat (send messages)', path: ['prompt'] });
    } else {
      if (r.prompt === undefined) ctx.addIssue({ code: 'custom', message: 'prompt is required when workload is completion', path: ['prompt'] });
      if (r.messages !== undefined) ctx.addIssue({ code: 'custom', message: 'messages needs workload: "chat"', path: ['messages'] });
    }
  })
  .meta({ id: 'TaskRequest' });
/** `POST /v2/tasks` as parsed (defaults of the schema applied, ids and limits maybe absent). */
export type TaskRequestBody = z.infer<typeof TaskRequestSchema>;
export type TaskRequestInput = z.input<typeof TaskRequestSchema>;
/** A task request with every default filled in: the one internal task model behind both doors. */
export type TaskRequest = TaskRequestBody & {
  task_id: string;
  session_id: string;
  max_tokens: number;
  deadline_ms: number;
  /** An engine call made by an engine-route door (`/v1/embeddings`, `/v1/rerank`, `/infill`); never from `POST /v2/tasks`. */
  call?: EngineCall;
};

/** Fills a parsed request's open defaults (ids, `max_tokens`, `deadline_ms`). */
export function resolveTaskRequest(body: TaskRequestBody, defaults: { deadlineMs: number; newId: () => string }): TaskRequest {
  return {
    ...body,
    task_id: body.task_id ?? defaults.newId(),
    session_id: body.session_id ?? defaults.newId(),
    max_tokens: body.max_tokens ?? TASK_LIMITS.defaultMaxTokens,
    deadline_ms: body.deadline_ms ?? defaults.deadlineMs,
  };
}

/** One step a task waits on before it can run (model download, engine build, warm-up). */
export const PreparationStepSchema = z
  .strictObject({
    /** Stable id of the step within the task, e.g. `<pool>:model_fetch`. */
    id: z.string(),
    /** What the step does. */
    kind: z.enum(['engine_provision', 'model_fetch', 'pool_warmup']),
    /** Short human description. */
    description: z.string(),
    /** Estimated remaining time, milliseconds, when known. */
    estimated_ms: z.int().nonnegative().optional(),
    /** Total bytes to fetch (model_fetch), when known. */
    bytes_total: z.int().nonnegative().optional(),
    /** Bytes already fetched (model_fetch). */
    bytes_done: z.int().nonnegative().optional(),
    /** Progress of the step. */
    status: z.enum(['pending', 'running', 'done', 'failed']),
  })
  .meta({ id: 'PreparationStep' });
export type PreparationStep = z.infer<typeof PreparationStepSchema>;

/** 202 body of `POST /v2/tasks`. */
export const AdmissionResponseSchema = z
  .strictObject({
    /** Echo of the request's task id. */
    task_id: z.uuid(),
    /** Tasks ahead of this one in dispatch order (0-based). */
    queue_position: z.int().nonnegative(),
    /** Predicted wait until the first token, milliseconds: queue ahead ÷ free slots × measured decode time. */
    predicted_start_ms: z.int().nonnegative(),
    /** Suggested client back-off before polling again, milliseconds. */
    backoff_ms: z.int().nonnegative(),
    /** Absolute URLs of the task's event streams. */
    streams: z.strictObject({
      /** Plain SSE stream. */
      sse: z.url(),
      /** SSE stream with narration (`human`, `phase`, `prep`) in metrics frames. */
      sse_verbose: z.url(),
    }),
    /** Steps that must finish before the task can run; empty when a ready pool serves the model. */
    preparation: z.strictObject({ steps: z.array(PreparationStepSchema) }),
  })
  .meta({ id: 'AdmissionResponse' });
export type AdmissionResponse = z.infer<typeof AdmissionResponseSchema>;

/** `GET /v2/sessions/{id}`. */
export const SessionInfoSchema = z
  .strictObject({
    /** Session id. */
    session_id: z.uuid(),
    /** Seconds until the session expires without activity. */
    ttl_ms_remaining: z.int().nonnegative(),
    /** Tasks that ended in this session. */
    turns: z.int().nonnegative(),
    /** Tokens generated across the session (sum of `end.tokens_out`). */
    tokens_out: z.int().nonnegative(),
    /** Token budget left, when a budget is configured; absent = unlimited. */
    tokens_budget_remaining: z.int().optional(),
    /** Tasks of this session still queued or running. */
    active_tasks: z.int().nonnegative(),
  })
  .meta({ id: 'SessionInfo' });
export type SessionInfo = z.infer<typeof SessionInfoSchema>;
