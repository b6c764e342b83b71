import { describe, expect, it } from 'vitest';
import { ERROR_STATUS, ErrorCodeSchema, ErrorEnvelopeSchema, RETRIABLE_BY_DEFAULT, needsBackoffHeaders } from './index.js';

describe('error codes', () => {
  it('maps every code to the status the error table fixes (spec 10)', () => {
    expect(ERROR_STATUS).toEqual({
      INVALID_PARAMS: 400, DEADLINE_UNMET: 400, UNAUTHORIZED: 401, FORBIDDEN: 403, NOT_FOUND: 404, PAYLOAD_TOO_LARGE: 413,
      ADMISSION_REJECT: 429, QUEUE_FULL_DROP_LRU: 429, POOL_UNREADY: 503, POOL_UNAVAILABLE: 503,
      MODEL_NOT_AVAILABLE: 503, REPLICA_EXHAUSTED: 503, STORE_UNAVAILABLE: 503, DECODE_TIMEOUT: 500, WORKER_RESET: 502, INTERNAL: 500,
      MODEL_NOT_FOUND: 404, MODEL_LOAD_FAILED: 502, INSUFFICIENT_MEMORY: 503, CONFLICT: 409,
    });
    for (const code of ErrorCodeSchema.options) {
      expect(ERROR_STATUS[code]).toBeTypeOf('number');
      expect(RETRIABLE_BY_DEFAULT[code]).toBeTypeOf('boolean');
    }
  });

  it('asks for backoff headers exactly on 429 and 503', () => {
    const withHeaders = ErrorCodeSchema.options.filter(needsBackoffHeaders).sort();
    expect(withHeaders).toEqual(['ADMISSION_REJECT', 'INSUFFICIENT_MEMORY', 'MODEL_NOT_AVAILABLE', 'POOL_UNAVAILABLE', 'POOL_UNREADY', 'QUEUE_FULL_DROP_LRU', 'REPLICA_EXHAUSTED', 'STORE_UNAVAILABLE']);
  });

  it('envelope is strict and typed', () => {
    expect(ErrorEnvelopeSchema.safeParse({ code: 'ADMISSION_REJECT', message: 'queue full', retriable: true, retry_after_ms: 1000, policy_label: 'reject' }).success).toBe(true);
    expect(ErrorEnvelopeSchema.safeParse({ code: 'TEAPOT', message: 'x' }).success).toBe(false);
    expect(ErrorEnvelopeSchema.safeParse({ code: 'INTERNAL', message: 'x', stack: '...' }).success).toBe(false);
    expect(ErrorEnvelopeSchema.safeParse({ code: 'INTERNAL' }).success).toBe(false);
  });
});
