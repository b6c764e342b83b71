import { z } from 'zod';
import { PoolStateSchema } from './pool.js';

/**
 * `GET /healthz` of both daemons (liveness): the process serves HTTP. No auth, no work behind it;
 * a probe that fails this should restart the process.
 */
export const LivenessSchema = z
  .strictObject({
    /** Always `ok` when answered. */
    status: z.literal('ok'),
  })
  .meta({ id: 'Liveness' });
export type Liveness = z.infer<typeof LivenessSchema>;

/**
 * `GET /readyz` of orchestratord (readiness): 200 `ready` while it can admit tasks (listening, not
 * shutting down), else 503 `not_ready` with the reason. No auth. Says nothing about nodes: a
 * cluster without ready pools still admits (tasks queue or get MODEL_NOT_AVAILABLE).
 */
export const ReadinessSchema = z
  .strictObject({
    /** `ready` (200) or `not_ready` (503). */
    status: z.enum(['ready', 'not_ready']),
    /** Why not ready (`not listening`, `shutting down`). */
    reason: z.string().optional(),
  })
  .meta({ id: 'Readiness' });
export type Readiness = z.infer<typeof ReadinessSchema>;

/** One pool as pool-managerd's readiness probe reports it. */
export const ProbePoolSchema = z
  .strictObject({
    /** Lifecycle state. */
    state: PoolStateSchema,
    /** Still in its first provisioning since the daemon started (never ready, failed or stopped yet). */
    first_provisioning: z.boolean(),
    /** Why a failed pool failed. */
    last_error: z.string().optional(),
  })
  .meta({ id: 'ProbePool' });

/**
 * `GET /readyz` of pool-managerd: 200 `ready` once its API serves and no pool is still in its first
 * provisioning, else 503 `not_ready`. A `failed` pool is listed (with `last_error`) but does not make
 * the node not ready: one broken model must not take the node's other pools out of a load balancer.
 * No auth.
 */
export const ManagerReadinessSchema = z
  .strictObject({
    /** `ready` (200) or `not_ready` (503). */
    status: z.enum(['ready', 'not_ready']),
    /** Node id. */
    node_id: z.string(),
    /** Why not ready (the pools still in their first provisioning, or `shutting down`). */
    reason: z.string().optional(),
    /** Every pool by id. */
    pools: z.record(z.string(), ProbePoolSchema),
    /** Ids of the pools in state `failed` (reported, not a cause of `not_ready`). */
    failed: z.array(z.string()),
  })
  .meta({ id: 'ManagerReadiness' });
export type ManagerReadiness = z.infer<typeof ManagerReadinessSchema>;
