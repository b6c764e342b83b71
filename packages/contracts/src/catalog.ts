import { z } from 'zod';
import { GpuPolicySchema, NodeIdSchema, PoolIdSchema, Sha256Schema, TimestampSchema } from './common.js';

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

/** Longest drain an unload may give in-flight work, ms (as DrainRequest's `deadline_ms`). */
const UNLOAD_DEADLINE_MAX_MS = 3_600_000;
/** Drain deadline of an unload when the caller gives none, ms. */
const UNLOAD_DEADLINE_DEFAULT_MS = 30_000;

/**
 * Body of `POST /v2/catalog/models/{id}/load` on orchestratord (the body itself is optional): one
 * more copy of a catalog model, on `node` or, absent, on the node with the most room.
 */
export const CatalogLoadRequestSchema = z
  .strictObject({
    /** The one node to ask; it decides whether the model fits. Absent: the node with the most room. */
    node: NodeIdSchema.optional(),
  })
  .meta({ id: 'CatalogLoadRequest' });
export type CatalogLoadRequest = z.infer<typeof CatalogLoadRequestSchema>;

/**
 * Body of `POST /v2/catalog/models/{id}/unload` on orchestratord (the body itself is optional): the
 * model's copies loaded on demand go (idle first, never below its `pin`), each drained by its node.
 */
export const CatalogUnloadRequestSchema = z
  .strictObject({
    /** Only the copies on this node. Absent: any node's. */
    node: NodeIdSchema.optional(),
    /** How long in-flight work may continue before each engine is stopped, ms. @default 30000 */
    deadline_ms: z.int().min(0).max(UNLOAD_DEADLINE_MAX_MS).optional(),
  })
  .meta({ id: 'CatalogUnloadRequest' });
export type CatalogUnloadRequest = z.infer<typeof CatalogUnloadRequestSchema>;

/**
 * Query of `DELETE /v2/pools/{id}` on pool-managerd (orchestratord → node): unload a pool the
 * catalog loaded, from any state. Query values are strings on the wire, hence the coercion.
 */
export const PoolUnloadQuerySchema = z
  .strictObject({
    /** How long in-flight work may continue before the engine is stopped, ms. @default 30000 */
    deadline_ms: z.coerce
      .number()
      .int()
      .min(0)
      .max(UNLOAD_DEADLINE_MAX_MS)
      .default(UNLOAD_DEADLINE_DEFAULT_MS)
      // The coercion also accepts null, which the OpenAPI generator would list as a type; a query value is
      // an integer. A `type` in the meta replaces the generated schema, so the bounds are stated again.
      .meta({
        type: 'integer',
        minimum: 0,
        maximum: UNLOAD_DEADLINE_MAX_MS,
        default: UNLOAD_DEADLINE_DEFAULT_MS,
        description: 'How long in-flight work may continue before the engine is stopped, ms.',
      }),
  })
  .meta({ id: 'PoolUnloadQuery' });
export type PoolUnloadQuery = z.infer<typeof PoolUnloadQuerySchema>;

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
