import { z } from 'zod';
import { ChatMessagesSchema, SamplingSchema } from './sampling.js';
import { ErrorCodeSchema } from './errors.js';
import { PoolIdSchema, TimestampSchema } from './common.js';
import { EngineCallSchema, PoolCapabilitySchema } from './engine-calls.js';
import { PoolDemandFactsSchema } from './catalog.js';

/**
 * Pool lifecycle: `provisioning` (engine build, model fetch) → `starting` (spawned, waiting for
 * /health 200) → `ready` → `draining` (no new leases) → `stopped`; `failed` when provisioning or
 * supervision gave up (the circuit breaker is open), with `last_error`.
 */
export const PoolStateSchema = z.enum(['provisioning', 'starting', 'ready', 'draining', 'stopped', 'failed']);
export type PoolState = z.infer<typeof PoolStateSchema>;

/** Progress of the provisioning phase. */
export const ProvisioningProgressSchema = z
  .strictObject({
    /** Engine build progress, 0..1 (1 = cached or built). */
    engine: z.number().min(0).max(1),
    /** Model fetch progress, 0..1. */
    model: z.number().min(0).max(1),
    /** Model bytes fetched so far. */
    model_bytes_done: z.int().nonnegative().optional(),
    /** Model size, bytes, when known. */
    model_bytes_total: z.int().nonnegative().optional(),
  })
  .meta({ id: 'ProvisioningProgress' });
export type ProvisioningProgress = z.infer<typeof ProvisioningProgressSchema>;

/** Supervisor circuit breaker: `open` = no restarts until the cool-down, `half_open` = one trial. */
export const BreakerStateSchema = z.enum(['closed', 'open', 'half_open']);

/**
 * The facts every view of a pool carries: the heartbeat's snapshot (pool-managerd → orchestratord),
 * pool-managerd's own status and orchestratord's cluster view all pick their fields from here, so a
 * field means one thing with one bound wherever it appears. The bounds are the heartbeat's: it
 * crosses a process boundary, and the two views are built from the same values.
 */
export const PoolFactsSchema = z.strictObject({
  /** Pool id (unique within the node). */
  pool_id: PoolIdSchema,
  /** Lifecycle state. */
  state: PoolStateSchema,
  /** Accepts work (engine healthy, not draining). */
  ready: z.boolean(),
  /** Draining: no new work while in-flight work finishes. */
  draining: z.boolean(),
  /** Engine slots. */
  slots_total: z.int().nonnegative(),
  /** Slots not leased. Never negative. */
  slots_free: z.int().nonnegative(),
  /** Models served (catalog ids / refs). */
  models: z.array(z.string().max(512)).max(64),
  /** Other names of the models served (the pool's configured `aliases`); absent when none. */
  aliases: z.array(z.string().max(128)).max(16).optional(),
  /** Engine build identity. */
  engine_version: z.string().max(128),
  /** Context one request can use, tokens: the engine's per-slot `n_ctx` from `/props` (capped by the model's training context). */
  ctx: z.int().nonnegative(),
  /** Determinism profile (one slot, no continuous batching). */
  deterministic: z.boolean(),
  /** Measured decode rate, tokens/s (0 until measured). */
  decode_tps: z.number().nonnegative(),
  /** Free memory of the pool's GPUs (its `device_mask` devices, else all), bytes; absent for CPU pools or without a reading. */
  vram_free_bytes: z.int().nonnegative().optional(),
  /** Last error seen (spawn, readiness, crash, provisioning, a failed operation). */
  last_error: z.string().max(4096).optional(),
  /** Provisioning progress while `provisioning`. */
  progress: ProvisioningProgressSchema.optional(),
  /**
   * What the engine serves (issue 27), from the pool's config and the engine itself; absent (an
   * older node, or no engine bound yet) = `chat` and `completion`.
   */
  capabilities: z.array(PoolCapabilitySchema).max(8).optional(),
  ...PoolDemandFactsSchema.shape,
});

/**
 * Snapshot of one pool as pool-managerd sees it (`GET /v2/pools/{id}` on pool-managerd): the pool's
 * facts (`engine_version` absent until an engine ran) and its supervision.
 */
export const PoolStatusSchema = PoolFactsSchema
  .omit({ vram_free_bytes: true })
  .partial({ engine_version: true })
  .extend({
    /** Human reason for the current state (why not ready). */
    reason: z.string().optional(),
    /** Engine process is alive (may still be loading). */
    live: z.boolean(),
    /** Leases held right now. */
    active_leases: z.int().nonnegative(),
    /** Engine fingerprint (cache key of the binary). */
    engine_fingerprint: z.string().optional(),
    /**
     * llama-orch's llama.cpp patches the engine's binary was built with, in order (its build
     * provenance); absent when none was applied or the engine was adopted.
     */
    engine_patches: z.array(z.string().max(256)).max(64).optional(),
    /** Engine base URL (loopback). */
    engine_url: z.string().optional(),
    /** Restarts since the daemon started. */
    restarts: z.int().nonnegative(),
    /** Supervisor breaker state. */
    breaker: BreakerStateSchema,
    /** Last time the state changed. */
    updated_at: TimestampSchema,
  })
  .meta({ id: 'PoolStatus' });
export type PoolStatus = z.infer<typeof PoolStatusSchema>;

/** `GET /health` of pool-managerd. */
export const ManagerHealthSchema = z
  .strictObject({
    /** Daemon is up. */
    status: z.literal('ok'),
    /** Node id. */
    node_id: z.string(),
    /** Pools by state. */
    pools: z.record(z.string(), PoolStateSchema),
  })
  .meta({ id: 'ManagerHealth' });

/** `POST /v2/pools/{id}/drain`. */
export const DrainRequestSchema = z
  .strictObject({
    /** How long in-flight work may continue before the engine is stopped, milliseconds. */
    deadline_ms: z.int().min(0).max(3_600_000),
  })
  .meta({ id: 'DrainRequest' });
export type DrainRequest = z.infer<typeof DrainRequestSchema>;

/** `POST /v2/pools/{id}/reload`. */
export const ReloadRequestSchema = z
  .strictObject({
    /** Model to serve instead; on failure the old engine is restored. */
    new_model_ref: z.string().min(1).max(512),
    /** Expected SHA-256 of the new model. */
    sha256: z.string().regex(/^[0-9a-f]{64}$/).optional(),
    /** Drain deadline for in-flight work, milliseconds. @default 30000 */
    deadline_ms: z.int().min(0).max(3_600_000).default(30_000),
  })
  .meta({ id: 'ReloadRequest' });
export type ReloadRequest = z.infer<typeof ReloadRequestSchema>;

/** 202 body of drain/reload: the operation started; poll the pool for its outcome. */
export const PoolOperationResponseSchema = z
  .strictObject({
    /** Pool id. */
    pool_id: z.string(),
    /** Operation accepted. */
    operation: z.enum(['drain', 'reload']),
    /** Pool state right after accepting. */
    state: PoolStateSchema,
  })
  .meta({ id: 'PoolOperationResponse' });

/**
 * Body of `POST /v2/pools/{id}/completions` on pool-managerd (sent by orchestratord). A
 * `completion` runs on the engine's `/completion` with `prompt`; a `chat` on its
 * `/v1/chat/completions` with `messages`, rendered with the model's own template. `sampling` is
 * forwarded to the engine unchanged.
 */
export const DispatchRequestSchema = z
  .strictObject({
    /** Task id, for logs and the engine's request correlation. */
    task_id: z.uuid(),
    /** What to run. @default completion */
    workload: z.enum(['completion', 'chat']).default('completion'),
    /** Prompt text (`completion`). */
    prompt: z.string().optional(),
    /** The conversation (`chat`). */
    messages: ChatMessagesSchema.optional(),
    /** Max tokens to generate (`n_predict`). */
    max_tokens: z.int().min(1),
    /** Seed; absent = random. */
    seed: z.int().min(0).max(0xffff_ffff).optional(),
    /** Greedy sampling (temperature 0) for deterministic output; overrides `sampling.temperature`. @default false */
    greedy: z.boolean().default(false),
    /** Engine sampling temperature when not greedy (older field; `sampling.temperature` wins). */
    temperature: z.number().min(0).max(5).optional(),
    /** Sampling and output controls, forwarded to the engine. */
    sampling: SamplingSchema.optional(),
    /** Reuse the engine's KV cache for a matching prompt prefix (off under the strict determinism profile). @default false */
    cache_prompt: z.boolean().default(false),
    /** Deadline for the whole stream, milliseconds from receipt. */
    deadline_ms: z.int().positive().optional(),
    /**
     * `false`: the engine is asked for one non-streamed answer on its OpenAI route
     * (`/v1/chat/completions` for a chat, `/v1/completions` for a completion) and the reply is one
     * `result` event ({@link DispatchResultEventSchema}) instead of `token` events and an `end`.
     * Absent or `true`: token events. @default true
     */
    stream: z.boolean().optional(),
    /**
     * Engine call (issue 27: embeddings, rerank, infill): when present, pool-managerd sends
     * `call.body` to the engine route of `call.kind` as it is and `workload`, `prompt`, `messages`
     * and `sampling` are not used. Non-streamed (`stream: false`): one `result` event whose `body`
     * is the engine's answer. Streamed (infill only): token events as for a completion.
     */
    call: EngineCallSchema.optional(),
    /**
     * How long a streamed dispatch keeps generating after its connection closed without a cancel,
     * milliseconds, so the orchestrator can re-attach (another replica, after a crash) with
     * `GET /v2/pools/{id}/dispatches/{task_id}?after=<i>`; an explicit cancel is
     * `DELETE /v2/pools/{id}/dispatches/{task_id}`. Absent or 0: a closed connection cancels.
     * Only for streamed dispatches (token events); ignored for `stream: false` answers and engine calls.
     */
    reattach_ms: z.int().min(0).max(120_000).optional(),
  })
  .superRefine((r, ctx) => {
    if (r.call !== undefined) return;
    if (r.workload === 'chat' && r.messages === undefined) ctx.addIssue({ code: 'custom', message: 'messages is required for a chat', path: ['messages'] });
    if (r.workload === 'completion' && r.prompt === undefined) ctx.addIssue({ code: 'custom', message: 'prompt is required for a completion', path: ['prompt'] });
  })
  .meta({ id: 'DispatchRequest' });
export type DispatchRequest = z.infer<typeof DispatchRequestSchema>;
export type DispatchRequestInput = z.input<typeof DispatchRequestSchema>;

/** Path of `GET`/`DELETE /v2/pools/{id}/dispatches/{task_id}` on pool-managerd (re-attach, cancel). */
export const DispatchPathSchema = z.strictObject({ id: PoolIdSchema, task_id: z.uuid() }).meta({ id: 'DispatchPath' });

/** Query of the re-attach `GET /v2/pools/{id}/dispatches/{task_id}`. */
export const DispatchReattachQuerySchema = z
  .strictObject({
    /** Replay the token events with `i` above this index (the last one the client has); absent or -1: all of them. */
    after: z
      .string()
      .regex(/^(-1|0|[1-9]\d{0,9})$/, 'after must be -1 or a token index')
      .optional(),
  })
  .meta({ id: 'DispatchReattachQuery' });

/** Normalised events streamed by pool-managerd (NDJSON or SSE), one per line/frame. */
export const DispatchEventSchema = z
  .discriminatedUnion('type', [
    z.strictObject({
      type: z.literal('token'),
      /** Text piece (a chat: the delta's `content`, '' when the delta carries only other fields). */
      t: z.string(),
      /** Piece index from 0. */
      i: z.int().nonnegative(),
      /** A chat delta's other fields (`tool_calls`, `reasoning_content` …), as the engine sent them. */
      delta: z.record(z.string(), z.unknown()).optional(),
      /** The engine's log probabilities for this piece, when requested. */
      logprobs: z.unknown().optional(),
    }),
    z.strictObject({
      type: z.literal('end'),
      /** Engine's token count (`tokens_predicted`). */
      tokens_out: z.int().nonnegative(),
      /** Engine decode time, ms (`timings.predicted_ms`). */
      decode_ms: z.number().nonnegative(),
      /** Why it stopped. */
      stop_type: z.enum(['eos', 'limit', 'word', 'cancel']),
      /** OpenAI's form of `stop_type` (`tool_calls` only for a chat that called a tool). */
      finish_reason: z.enum(['stop', 'length', 'tool_calls']).optional(),
      /** Prompt tokens (`tokens_evaluated` / `usage.prompt_tokens`). */
      prompt_tokens: z.int().nonnegative().optional(),
      /** Of those, served from the engine's prompt cache (`timings.cache_n`). */
      cached_tokens: z.int().nonnegative().optional(),
      /** Engine build identity. */
      engine_version: z.string(),
      /** Pool id. */
      pool_id: z.string(),
      /** Node id. */
      node_id: z.string(),
    }),
    z.strictObject({
      type: z.literal('error'),
      /** Typed code (WORKER_RESET when the engine stream broke). */
      code: ErrorCodeSchema,
      /** Human message. */
      message: z.string(),
      /** Whether a retry elsewhere may succeed. */
      retriable: z.boolean(),
    }),
  ])
  .meta({ id: 'DispatchEvent' });
export type DispatchEvent = z.infer<typeof DispatchEventSchema>;

/**
 * The one event of a non-streamed dispatch (`stream: false`) that succeeded: the `end` figures
 * (from the engine's `usage`, `timings` and finish reason) and the engine's own OpenAI body as it
 * answered (`chat.completion` or `text_completion`: choices with message or text, tool calls,
 * logprobs, usage, timings), last on the line so pool-managerd writes the engine's bytes as they
 * came. A failure is the usual `error` event instead.
 */
export const DispatchResultEventSchema = z
  .strictObject({
    type: z.literal('result'),
    /** Engine's generated-token count (`usage.completion_tokens`). */
    tokens_out: z.int().nonnegative(),
    /** Engine decode time, ms (`timings.predicted_ms`; 0 when the engine sent no timings). */
    decode_ms: z.number().nonnegative(),
    /** `limit` for finish reason `length`, else `eos`. */
    stop_type: z.enum(['eos', 'limit']),
    /** The engine's finish reason. */
    finish_reason: z.enum(['stop', 'length', 'tool_calls']),
    /** Prompt tokens (`usage.prompt_tokens`). */
    prompt_tokens: z.int().nonnegative(),
    /** Of those, served from the engine's prompt cache (`usage.prompt_tokens_details.cached_tokens`), when the engine says. */
    cached_tokens: z.int().nonnegative().optional(),
    /** Engine build identity. */
    engine_version: z.string(),
    /** Pool id. */
    pool_id: z.string(),
    /** Node id. */
    node_id: z.string(),
    /** The engine's answer body; its members are not re-validated here (see pool-managerd's check). */
    body: z.record(z.string(), z.unknown()),
  })
  .meta({ id: 'DispatchResultEvent' });
export type DispatchResultEvent = z.infer<typeof DispatchResultEventSchema>;

/** `GET /v2/pools` on pool-managerd. */
export const PoolStatusListSchema = z.strictObject({ pools: z.array(PoolStatusSchema) }).meta({ id: 'PoolStatusList' });
