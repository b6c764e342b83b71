import { z } from 'zod';
import { GpuPolicySchema, PoolIdSchema, Sha256Schema, TimestampSchema } from './common.js';

/**
 * Models on demand (spec 67): the fleet catalog's per-model policy, the load a node is asked to
 * perform, and the memory a node has for such loads.
 */

/** A name clients may use for a model (`model` on /v1, `model_ref` on /v2). */
export const ModelAliasSchema = z
  .string()
  .regex(/^[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,127}$/, 'alias: 1–128 of [A-Za-z0-9._:/@+-], not starting with a symbol');

/** What an engine loaded for a catalog model serves: generation (chat, completion, infill), embeddings or reranking. */
export const ModelServeSchema = z.enum(['generate', 'embeddings', 'reranking']);
export type ModelServe = z.infer<typeof ModelServeSchema>;

/** How the fleet serves one catalog model. */
export const ModelPolicySchema = z.strictObject({
  /** Engine context, tokens (`-c`). @default 2048 */
  ctx: z.int().min(64).max(1_048_576).default(2048),
  /** Slots of each loaded copy (`--parallel`). @default 1 */
  slots: z.int().min(1).max(256).default(1),
  /** GPU policy of a loaded copy. @default off */
  gpu: GpuPolicySchema.default('off'),
  /** What a loaded copy serves. @default generate */
  serve: ModelServeSchema.default('generate'),
  /** Copies kept loaded whatever the traffic: never unloaded or evicted below this. @default 0 */
  pin: z.int().min(0).max(64).default(0),
  /** Most copies loaded at once across the fleet. @default 1 */
  max_loaded: z.int().min(1).max(256).default(1),
  /** Unload a copy idle this long, seconds; 0 = never. @default 900 */
  idle_ttl_s: z.int().min(0).max(30 * 86_400).default(900),
  /** Eviction weight: a model of lower priority is evicted first. @default 0 */
  priority: z.int().min(-100).max(100).default(0),
});
export type ModelPolicy = z.infer<typeof ModelPolicySchema>;

/**
 * `POST /v2/pools` on pool-managerd (orchestratord → node): start a pool for a catalog model on
 * this node's on-demand engine settings. 202 with the pool's status; the heartbeat reports its
 * progress (`provisioning` → `starting` → `ready`, or `failed` with `last_error`).
 */
export const PoolLoadRequestSchema = z
  .strictObject({
    /** The new pool's id; the node refuses one it already has (409). */
    pool_id: PoolIdSchema,
    /** Model ref. */
    model: z.string().min(1).max(512),
    /** Expected SHA-256 of the model file. */
    sha256: Sha256Schema.optional(),
    aliases: z.array(ModelAliasSchema).max(16).default([]),
    ctx: ModelPolicySchema.shape.ctx,
    slots: ModelPolicySchema.shape.slots,
    gpu: ModelPolicySchema.shape.gpu,
    serve: ModelPolicySchema.shape.serve,
  })
  .meta({ id: 'PoolLoadRequest' });
export type PoolLoadRequest = z.infer<typeof PoolLoadRequestSchema>;
export type PoolLoadRequestInput = z.input<typeof PoolLoadRequestSchema>;

/** Memory a node offers to loaded models: the on-demand budget and what its pools take of it. */
export const NodeMemorySchema = z
  .strictObject({
    /** Bytes the node may give to pools (the configured budget; GPU hosts: their devices' memory). */
    budget_bytes: z.int().nonnegative(),
    /** Bytes its pools take now (measured for running engines, projected for loading ones). */
    used_bytes: z.int().nonnegative(),
  })
  .meta({ id: 'NodeMemory' });
export type NodeMemory = z.infer<typeof NodeMemorySchema>;

/** Where a pool comes from: the node's YAML (a pinned model) or a load the catalog asked for. */
export const PoolOriginSchema = z.enum(['config', 'catalog']);
export type PoolOrigin = z.infer<typeof PoolOriginSchema>;

/** The on-demand facts of a pool, carried in its heartbeat snapshot. */
export const PoolDemandFactsSchema = z.strictObject({
  /** Absent = `config`. */
  origin: PoolOriginSchema.optional(),
  /** Since when no slot is leased; absent while one is. */
  idle_since: TimestampSchema.optional(),
  /** Memory the pool takes, bytes: the engine's resident size once running, the projection before. */
  memory_bytes: z.int().nonnegative().optional(),
});
