import { z } from 'zod';
import { EngineKindSchema, HttpUrlSchema, PoolIdSchema, TimestampSchema } from './common.js';

/**
 * `<runtime_dir>/engines/<pool_id>-<replica_id>.json`: written atomically (temp + rename) only after
 * the engine answered `/health` 200. A file dropped by hand for an engine started elsewhere is adopted.
 */
export const HandoffFileSchema = z
  .strictObject({
    /** Pool the engine serves. */
    pool_id: PoolIdSchema,
    /** Replica id within the pool. */
    replica_id: z.string().regex(/^[a-z0-9][a-z0-9_-]{0,63}$/),
    /** Engine kind. */
    engine: EngineKindSchema,
    /** Engine build identity (e.g. `b1-de3ff81`). */
    engine_version: z.string(),
    /** Base URL of the engine (loopback). */
    url: HttpUrlSchema,
    /** Engine process id (for adoption checks and cleanup). */
    pid: z.int().positive(),
    /** Model the engine loaded. */
    model: z.strictObject({
      /** Catalog id / ref the pool serves. */
      id: z.string(),
      /** File path. */
      path: z.string(),
    }),
    /** Slots (`--parallel`) the engine was started with. */
    slots_total: z.int().positive(),
    /** `CUDA_VISIBLE_DEVICES` of the process. */
    device_mask: z.string().optional(),
    /** Engine argv after the binary. */
    flags: z.array(z.string()),
    /** `managed` = spawned by pool-managerd; `external` = started by an operator. */
    provisioning_mode: z.enum(['managed', 'external']),
    /** When the file was written. */
    written_at: TimestampSchema,
  })
  .meta({ id: 'HandoffFile', description: 'Engine handoff file written by pool-managerd.' });
export type HandoffFile = z.infer<typeof HandoffFileSchema>;
