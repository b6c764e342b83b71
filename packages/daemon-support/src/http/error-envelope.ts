import { CORRELATION_ID_HEADER, needsBackoffHeaders, type ErrorCode, type ErrorEnvelope } from '@llama-orch/contracts';
import type { FastifyError } from 'fastify';

/** A 429/503 that names no wait asks for this one, ms. */
export const DEFAULT_BACKOFF_MS = 1000;
/**
 * The least wait a 429/503 names, ms. `X-Backoff-Ms` and `retry_after_ms` say the server's own
 * estimate (a rate-limit window's rest may be 300 ms); `Retry-After`, in whole seconds, is ≥ 1.
 */
export const BACKOFF_FLOOR_MS = 1;

/** The wait of a 429/503, ms: `retryAfterMs` rounded, at least {@link BACKOFF_FLOOR_MS}; {@link DEFAULT_BACKOFF_MS} when absent. */
export function backoffMs(retryAfterMs: number | undefined): number {
  return Math.max(BACKOFF_FLOOR_MS, Math.round(retryAfterMs ?? DEFAULT_BACKOFF_MS));
}

/** `Retry-After` (whole seconds, rounded up, ≥ 1) and `X-Backoff-Ms` for a wait of `ms`. */
export function backoffHeaders(ms: number): { 'retry-after': string; 'x-backoff-ms': string } {
  return { 'retry-after': String(Math.max(1, Math.ceil(ms / 1000))), 'x-backoff-ms': String(ms) };
}

/**
 * What {@link sendErrorEnvelope} uses of a Fastify reply: an HTTP/1.1 reply and an HTTP/2 one (whose
 * types differ in their raw objects) are both one.
 */
export interface EnvelopeReply {
  readonly request: { readonly id: string };
  header(key: string, value: string): unknown;
  headers(values: Record<string, string>): unknown;
  code(statusCode: number): unknown;
  type(contentType: string): unknown;
  send(payload: unknown): unknown;
}

/**
 * Sends an ErrorEnvelope with `status` and `X-Correlation-Id`, and returns the reply. On 429 and 503
 * codes the envelope's `retry_after_ms` becomes {@link backoffMs} of it, `retriable` defaults to
 * true, and the backoff headers go with it. `render` gives another body for the same envelope
 * (orchestratord's /v1 door answers in OpenAI's shape).
 */
export function sendErrorEnvelope<R extends EnvelopeReply>(
  reply: R,
  status: number,
  envelope: ErrorEnvelope,
  render?: (envelope: ErrorEnvelope) => unknown,
): R {
  if (needsBackoffHeaders(envelope.code)) {
    const ms = backoffMs(envelope.retry_after_ms);
    envelope.retry_after_ms = ms;
    envelope.retriable ??= true;
    reply.headers(backoffHeaders(ms));
  }
  reply.header(CORRELATION_ID_HEADER, reply.request.id);
  reply.code(status);
  reply.type('application/json; charset=utf-8');
  reply.send(render !== undefined ? render(envelope) : envelope);
  return reply;
}

interface ValidationIssue {
  instancePath?: string;
  message?: string;
  keyword?: string;
  params?: Record<string, unknown>;
}

/** `field: message` for each issue (`context`, e.g. `body`, when at the root); unknown keys are named. */
export function describeValidation(context: string | undefined, issues: readonly ValidationIssue[]): string {
  const parts = issues.map((i) => {
    const path = (i.instancePath ?? '').split('/').filter(Boolean).join('.');
    if (i.keyword === 'unrecognized_keys' && Array.isArray(i.params?.keys)) {
      const keys = (i.params.keys as unknown[]).map((k) => (path ? `${path}.${String(k)}` : String(k)));
      return `unknown field${keys.length > 1 ? 's' : ''} ${keys.map((k) => `'${k}'`).join(', ')}`;
    }
    return `${path || context || 'body'}: ${i.message ?? 'invalid'}`;
  });
  return parts.join('; ');
}

/**
 * What a client got wrong, for an error Fastify raised about the request itself: schema
 * validation (`INVALID_PARAMS` naming each field), a body over the limit (`PAYLOAD_TOO_LARGE`), an
 * unknown route (`NOT_FOUND`), malformed JSON, an unsupported content type and any other 4xx
 * (`INVALID_PARAMS`). Undefined for anything else: the daemon's own errors, and failures (500).
 */
export function requestError(err: unknown): { code: ErrorCode; message: string } | undefined {
  const fe = err as Partial<FastifyError> & { validation?: ValidationIssue[]; validationContext?: string };
  if (Array.isArray(fe.validation) && fe.validation.length > 0) {
    return { code: 'INVALID_PARAMS', message: describeValidation(fe.validationContext, fe.validation) };
  }
  if (fe.code === 'FST_ERR_CTP_BODY_TOO_LARGE' || fe.statusCode === 413)
    return { code: 'PAYLOAD_TOO_LARGE', message: fe.message ?? 'request body is too large' };
  if (fe.statusCode === 404) return { code: 'NOT_FOUND', message: fe.message ?? 'not found' };
  if (typeof fe.statusCode === 'number' && fe.statusCode >= 400 && fe.statusCode < 500) {
    return { code: 'INVALID_PARAMS', message: `body: ${fe.message ?? 'malformed request'}` };
  }
  return undefined;
}
