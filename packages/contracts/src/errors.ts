import { z } from 'zod';

/**
 * Every error code the product puts on the wire. Stable: clients branch on these strings.
 * The HTTP status of each is fixed by {@link ERROR_STATUS}.
 */
export const ErrorCodeSchema = z.enum([
  'INVALID_PARAMS',
  'DEADLINE_UNMET',
  'UNAUTHORIZED',
  'FORBIDDEN',
  'NOT_FOUND',
  'PAYLOAD_TOO_LARGE',
  'ADMISSION_REJECT',
  'QUEUE_FULL_DROP_LRU',
  'POOL_UNREADY',
  'POOL_UNAVAILABLE',
  'MODEL_NOT_AVAILABLE',
  'REPLICA_EXHAUSTED',
  'STORE_UNAVAILABLE',
  'DECODE_TIMEOUT',
  'WORKER_RESET',
  'INTERNAL',
  'MODEL_NOT_FOUND',
  'MODEL_LOAD_FAILED',
  'INSUFFICIENT_MEMORY',
  'CONFLICT',
]);
export type ErrorCode = z.infer<typeof ErrorCodeSchema>;

/** The one code → HTTP status table (spec 10). WORKER_RESET is 502: the upstream engine failed. */
export const ERROR_STATUS: Readonly<Record<ErrorCode, number>> = Object.freeze({
  INVALID_PARAMS: 400,
  DEADLINE_UNMET: 400,
  UNAUTHORIZED: 401,
  FORBIDDEN: 403,
  NOT_FOUND: 404,
  PAYLOAD_TOO_LARGE: 413,
  ADMISSION_REJECT: 429,
  QUEUE_FULL_DROP_LRU: 429,
  POOL_UNREADY: 503,
  POOL_UNAVAILABLE: 503,
  MODEL_NOT_AVAILABLE: 503,
  REPLICA_EXHAUSTED: 503,
  /** The cluster store (Redis) shared by orchestratord replicas does not answer now. */
  STORE_UNAVAILABLE: 503,
  DECODE_TIMEOUT: 500,
  WORKER_RESET: 502,
  INTERNAL: 500,
  /** Neither a catalog entry nor served by any pool (spec 67). */
  MODEL_NOT_FOUND: 404,
  /** Loading the model failed (fetch, verification, engine start); the catalog says why. */
  MODEL_LOAD_FAILED: 502,
  /** No node has room for the model now, and nothing can be evicted (spec 67). */
  INSUFFICIENT_MEMORY: 503,
  /** The request contradicts the current state (a pool id taken, an alias of another model, a static pool). */
  CONFLICT: 409,
});

/** Codes whose responses must carry `Retry-After` (seconds, ≥ 1) and `X-Backoff-Ms`. */
export function needsBackoffHeaders(code: ErrorCode): boolean {
  const status = ERROR_STATUS[code];
  return status === 429 || status === 503;
}

/** Whether a client may retry the same request unchanged after the error. */
export const RETRIABLE_BY_DEFAULT: Readonly<Record<ErrorCode, boolean>> = Object.freeze({
  INVALID_PARAMS: false,
  DEADLINE_UNMET: false,
  UNAUTHORIZED: false,
  FORBIDDEN: false,
  NOT_FOUND: false,
  PAYLOAD_TOO_LARGE: false,
  ADMISSION_REJECT: true,
  QUEUE_FULL_DROP_LRU: true,
  POOL_UNREADY: true,
  POOL_UNAVAILABLE: true,
  MODEL_NOT_AVAILABLE: true,
  REPLICA_EXHAUSTED: true,
  STORE_UNAVAILABLE: true,
  DECODE_TIMEOUT: true,
  WORKER_RESET: true,
  INTERNAL: false,
  MODEL_NOT_FOUND: false,
  MODEL_LOAD_FAILED: false,
  INSUFFICIENT_MEMORY: true,
  CONFLICT: false,
});

/** Body of every non-2xx response of both services. */
export const ErrorEnvelopeSchema = z
  .strictObject({
    /** Stable machine-readable code; see {@link ERROR_STATUS}. */
    code: ErrorCodeSchema,
    /** One human sentence; for INVALID_PARAMS it names the offending field. */
    message: z.string(),
    /** Engine involved, when the error came from (or concerns) one, e.g. `llamacpp`. */
    engine: z.string().optional(),
    /** Whether retrying the same request may succeed. */
    retriable: z.boolean().optional(),
    /** Suggested wait before retrying, milliseconds (mirrors `X-Backoff-Ms`). */
    retry_after_ms: z.int().nonnegative().optional(),
    /** Which admission policy produced a 429 (`reject`, `drop-lru`). */
    policy_label: z.string().optional(),
  })
  .meta({ id: 'ErrorEnvelope', description: 'Typed error body; status fixed by the code.' });
export type ErrorEnvelope = z.infer<typeof ErrorEnvelopeSchema>;
