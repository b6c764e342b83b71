import { z } from 'zod';
import { EngineKindSchema, PoolIdSchema } from './common.js';

/** Absolute caps enforced by the schema; orchestratord narrows `ctx` further to its live `ctx_max`. */
export const TASK_LIMITS = Object.freeze({ ctxMax: 1_048_576, maxTokensMax: 32_768, promptMaxChars: 1_000_000 });

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

/** Body of `POST /v2/tasks`. Unknown fields are rejected. */
export const TaskRequestSchema = z
  .strictObject({
    /** Client-generated id; the task is addressed by it afterwards. */
    task_id: z.uuid(),
    /** Session the task belongs to (budgets and turns are counted per session). */
    session_id: z.uuid(),
    /** Kind of work. Only `completion` is served; others are rejected with INVALID_PARAMS. */
    workload: z.literal('completion'),
    /** Model reference as the pools know it (catalog id or ref, e.g. `synthetic:llama`). */
    model_ref: z.string().min(1).max(512),
    /** Engine that must serve the task. */
    engine: EngineKindSchema,
    /** Context tokens the task needs; 0 = the pool's default. Checked against `ctx_max`. */
    ctx: z.int().min(0).max(TASK_LIMITS.ctxMax),
    /** Lane: `interactive` is always dequeued before `batch`. */
    priority: z.enum(['interactive', 'batch']),
    /** Sampling seed; with greedy sampling and one slot, the same seed gives the same bytes. */
    seed: z.int().min(0).max(0xffff_ffff).optional(),
    /** `strict` places only on pools running the determinism profile (one slot, no cont. batching). */
    determinism: z.enum(['strict', 'best_effort']).optional(),
    /** Version label of the sampler profile the client expects (informational). */
    sampler_profile_version: z.string().max(64).optional(),
    /** Prompt text sent to the engine verbatim. */
    prompt: z.string().max(TASK_LIMITS.promptMaxChars),
    /** Maximum tokens to generate (engine `n_predict`). */
    max_tokens: z.int().min(1).max(TASK_LIMITS.maxTokensMax),
    /** Time budget from admission to the end of the stream, milliseconds. */
    deadline_ms: z.int().positive().max(86_400_000),
    /** Client's estimate of tokens out, used for predictions only. */
    expected_tokens: z.int().min(0).max(TASK_LIMITS.maxTokensMax).optional(),
    /** Hint that KV cache reuse is worthwhile (`reuse`) or not (`cold`). */
    kv_hint: z.enum(['reuse', 'cold']).optional(),
    /** Placement steering; absent = `auto`. */
    placement: PlacementOverridesSchema.optional(),
  })
  .meta({ id: 'TaskRequest' });
export type TaskRequest = z.infer<typeof TaskRequestSchema>;
export type TaskRequestInput = z.input<typeof TaskRequestSchema>;

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
