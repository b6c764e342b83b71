import { z } from 'zod';
import { PoolFactsSchema, PoolStateSchema } from './pool.js';
import { NodeStateSchema } from './nodes.js';

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
 * A model as the cluster sees it (`GET /v2/catalog/models`, 202 of `POST /v2/catalog/models`).
 * Files, digests and sizes live in each node's own catalog (CatalogEntry); orchestratord only
 * knows which pools list a model and which refs operators registered.
 */
export const ClusterModelSchema = z
  .strictObject({
    /** Catalog id (the ref as nodes report it; URL-encode it in paths). */
    id: z.string(),
    /** Model ref. */
    ref: z.string(),
    /** `ready`: a pool serves it; `provisioning`: a pool is preparing it; `unavailable`: only failed/offline pools list it; `registered`: interest only. */
    status: z.enum(['ready', 'provisioning', 'unavailable', 'registered']),
    /** Pools (`node/pool`) that list the model: where it is loaded (or loading). */
    pools: z.array(z.string()),
    /** Other names clients may use for it (the aliases of the pools that serve it), sorted. */
    aliases: z.array(z.string()),
    /** Whether an operator registered interest in it. */
    registered: z.boolean(),
    /** Expected digest given at registration. */
    sha256: z.string().optional(),
  })
  .meta({ id: 'ClusterModel' });
export type ClusterModel = z.infer<typeof ClusterModelSchema>;

export const ClusterModelListSchema = z.strictObject({ models: z.array(ClusterModelSchema) }).meta({ id: 'ClusterModelList' });
