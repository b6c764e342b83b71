import { z } from 'zod';
import { HttpUrlSchema, NodeIdSchema, TimestampSchema } from './common.js';
import { PoolFactsSchema } from './pool.js';
import { NodeMemorySchema } from './catalog.js';

/** One GPU of a node. */
export const GpuInfoSchema = z.strictObject({
  /** Device index as CUDA numbers it. */
  device_id: z.int().nonnegative(),
  /** Marketing name (e.g. `NVIDIA H100 80GB HBM3`). */
  name: z.string(),
  /** Total memory, bytes. */
  vram_total_bytes: z.int().nonnegative(),
  /** Compute capability (e.g. `9.0`). */
  compute_capability: z.string(),
});

/** Hardware a node offers. */
export const NodeCapabilitiesSchema = z
  .strictObject({
    /** GPUs; empty on CPU-only nodes. */
    gpus: z.array(GpuInfoSchema).max(64),
    /** Logical CPU cores. */
    cpu_cores: z.int().positive(),
    /** Physical memory, bytes. */
    ram_total_bytes: z.int().nonnegative(),
  })
  .meta({ id: 'NodeCapabilities' });

/** Per-pool part of a heartbeat: what the node's registry knows right now (every pool fact). */
export const PoolSnapshotSchema = PoolFactsSchema.meta({ id: 'PoolSnapshot' });
export type PoolSnapshot = z.infer<typeof PoolSnapshotSchema>;

/** `POST /v2/nodes/register`. */
export const NodeRegisterRequestSchema = z
  .strictObject({
    /** Node id, unique in the cluster. */
    node_id: NodeIdSchema,
    /** Stable machine identity (hostname or machine-id). */
    machine_id: z.string().min(1).max(256),
    /** Base URL of the node's pool-managerd. */
    address: HttpUrlSchema,
    /**
     * Base URL where the node also serves `POST /v2/pools/{id}/completions` over cleartext HTTP/2
     * (h2c, prior knowledge). orchestratord then multiplexes every dispatch to this node over one
     * connection; without it, each in-flight dispatch holds its own HTTP/1.1 connection to `address`.
     */
    dispatch_h2c: HttpUrlSchema.optional(),
    /** Pools at registration time. */
    pools: z.array(PoolSnapshotSchema).max(256),
    /** Hardware. */
    capabilities: NodeCapabilitiesSchema,
    /** pool-managerd version. */
    version: z.string().max(64),
    /** Memory for models on demand; absent = the node loads no model on request. */
    memory: NodeMemorySchema.optional(),
  })
  .meta({ id: 'NodeRegisterRequest' });
export type NodeRegisterRequest = z.infer<typeof NodeRegisterRequestSchema>;

/** Reply to register and heartbeat. */
export const NodeAckSchema = z
  .strictObject({
    /** When the next heartbeat is expected, milliseconds from now. */
    next_heartbeat_ms: z.int().positive(),
  })
  .meta({ id: 'NodeAck' });
export type NodeAck = z.infer<typeof NodeAckSchema>;

/** `POST /v2/nodes/{id}/heartbeat`. A 404 reply tells the node to register again. */
export const HeartbeatRequestSchema = z
  .strictObject({
    /** Node clock at send time. */
    timestamp: TimestampSchema,
    /** Every pool of the node. */
    pools: z.array(PoolSnapshotSchema).max(256),
    /** Memory for models on demand (as at registration), now. */
    memory: NodeMemorySchema.optional(),
  })
  .meta({ id: 'HeartbeatRequest' });
export type HeartbeatRequest = z.infer<typeof HeartbeatRequestSchema>;

/** `registering` until the first heartbeat; `offline` after 3 missed intervals; `online` again on the next one. */
export const NodeStateSchema = z.enum(['registering', 'online', 'offline']);
export type NodeState = z.infer<typeof NodeStateSchema>;

/** `GET /v2/nodes` item. */
export const NodeInfoSchema = z
  .strictObject({
    node_id: z.string(),
    machine_id: z.string(),
    address: z.string(),
    /** h2c dispatch URL, when the node offers one. */
    dispatch_h2c: z.string().optional(),
    state: NodeStateSchema,
    /** When the node entered `state` (so an operator sees how long it has been offline). */
    state_since: TimestampSchema,
    /**
     * Last heartbeat (or registration) time: the heartbeat's own `timestamp` when it is plausible
     * (not in the future, at most min(interval/4, 1 s) old on arrival), else its arrival.
     */
    last_seen: TimestampSchema,
    capabilities: NodeCapabilitiesSchema,
    version: z.string(),
    pools: z.array(PoolSnapshotSchema),
    /** Memory for models on demand, from its last heartbeat; absent = it loads none. */
    memory: NodeMemorySchema.optional(),
  })
  .meta({ id: 'NodeInfo' });
export type NodeInfo = z.infer<typeof NodeInfoSchema>;

export const NodeListSchema = z.strictObject({ nodes: z.array(NodeInfoSchema) }).meta({ id: 'NodeList' });
