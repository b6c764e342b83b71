import { z } from 'zod';
import { PoolFactsSchema, PoolStateSchema } from './pool.js';
import { NodeStateSchema } from './nodes.js';
import { ModelPolicySchema } from './catalog.js';
import { TimestampSchema } from './common.js';

/** `GET /v2/meta/capabilities`: what the cluster can serve now, from live pools. */
export const CapabilitiesSchema = z
  .strictObject({
    /** API version. */
    api_version: z.string(),
    /** Largest `ctx` a task may ask for (max over ready pools; configured cap when none). */
    ctx_max: z.int().nonnegative(),
    /** Largest `max_tokens`. */
    max_tokens_max: z.int().positive(),
    /** Engines and the versions live pools run. */
    engines: z.array(z.strictObject({ engine: z.string(), versions: z.array(z.string()) })),
    /** Workloads accepted. */
    workloads: z.array(z.string()),
    /** Models served by at least one pool. */
    models: z.array(z.string()),
    /** Admission queue capacity and policy. */
    admission: z.strictObject({ capacity: z.int().nonnegative(), policy: z.enum(['reject', 'drop-lru']) }),
  })
  .meta({ id: 'Capabilities' });
export type Capabilities = z.infer<typeof CapabilitiesSchema>;

/** `GET /v2/pools` item on orchestratord (from the node registry): the pool's facts as its node last reported them, and the node's side. */
export const ClusterPoolSchema = PoolFactsSchema
  .omit({ ctx: true, deterministic: true, decode_tps: true })
  .extend({
    node_id: z.string(),
    node_state: NodeStateSchema,
    /** Slots leased by orchestratord right now (local accounting on top of heartbeats). */
    leased: z.int().nonnegative(),
  })
  .meta({ id: 'ClusterPool' });
export type ClusterPool = z.infer<typeof ClusterPoolSchema>;

export const ClusterPoolListSchema = z.strictObject({ pools: z.array(ClusterPoolSchema) }).meta({ id: 'ClusterPoolList' });

/** `GET /v2/pools/{id}/health`. */
export const PoolHealthSchema = z
  .strictObject({
    pool_id: z.string(),
    /** Node is online and the pool's engine process is up. */
    live: z.boolean(),
    /** Placeable now. */
    ready: z.boolean(),
    draining: z.boolean(),
    state: PoolStateSchema,
    last_error: z.string().optional(),
  })
  .meta({ id: 'PoolHealth' });
export type PoolHealth = z.infer<typeof PoolHealthSchema>;

/** `GET /v2/catalog/availability`: which models are served where. */
export const AvailabilitySchema = z
  .strictObject({
    models: z.array(
      z.strictObject({
        model: z.string(),
        /** Pools ready to serve it. */
        ready_pools: z.array(z.string()),
        /** Pools provisioning it. */
        provisioning_pools: z.array(z.string()),
      }),
    ),
  })
  .meta({ id: 'Availability' });

/**
 * A model as the cluster sees it (`GET /v2/catalog/models`, the reply of `POST /v2/catalog/models`):
 * each model once, whether a catalog entry, a model static pools serve, or both. Files, digests
 * and sizes live in each node's own catalog (CatalogEntry).
 */
export const ClusterModelSchema = z
  .strictObject({
    /** Catalog id (the ref as nodes report it; URL-encode it in paths). */
    id: z.string(),
    /** Model ref. */
    ref: z.string(),
    /**
     * `ready`: a pool serves it; `loading`: a pool is preparing it; `unloading`: its last copies
     * are draining; `failed`: its last load failed, or only failed/offline pools list it;
     * `registered`: in the catalog, loaded nowhere.
     */
    status: z.enum(['registered', 'loading', 'ready', 'unloading', 'failed']),
    /** Pools (`node/pool`) that list the model: where it is loaded (or loading). */
    pools: z.array(z.string()),
    /** Other names clients may use for it (the catalog's and those of the pools that serve it), sorted. */
    aliases: z.array(z.string()),
    /** Whether it is a catalog entry (loaded on demand). */
    registered: z.boolean(),
    /** Expected digest given at registration. */
    sha256: z.string().optional(),
    /** The catalog entry's policy. */
    policy: ModelPolicySchema.optional(),
    /** Whether copies are kept loaded whatever the traffic: a pin, or a static pool of a node's YAML. */
    pinned: z.boolean(),
    /** Since when every loaded copy is idle; absent while one is busy or none is loaded. */
    idle_since: TimestampSchema.optional(),
    /** Why the last load failed (`failed`). */
    last_error: z.string().optional(),
  })
  .meta({ id: 'ClusterModel' });
export type ClusterModel = z.infer<typeof ClusterModelSchema>;

export const ClusterModelListSchema = z.strictObject({ models: z.array(ClusterModelSchema) }).meta({ id: 'ClusterModelList' });
