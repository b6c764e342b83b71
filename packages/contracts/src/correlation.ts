/**
 * `X-Correlation-Id`: set by a client (or made by orchestratord), echoed on every response, sent
 * with every dispatch to pool-managerd and logged as `correlation_id` by both daemons, so one
 * request's lines can be joined across the hop.
 */
export const CORRELATION_ID_HEADER = 'x-correlation-id';

const CORRELATION_ID = /^[A-Za-z0-9._:@/+=-]{1,128}$/;

/** The one id format both daemons accept: 1–128 URL-safe characters; anything else is replaced. */
export function isCorrelationId(value: unknown): value is string {
  return typeof value === 'string' && CORRELATION_ID.test(value);
}
