/**
 * The error code → HTTP status table of the product (packages/contracts/src/errors.ts
 * `ERROR_STATUS`), copied as test data on purpose: the suite talks HTTP only, and a change of the
 * wire table must show up here as a failing check, not be followed silently by an import.
 */
export const EXPECTED_ERROR_STATUS: Readonly<Record<string, number>> = Object.freeze({
  INVALID_PARAMS: 400,
  DEADLINE_UNMET: 400,
  UNAUTHORIZED: 401,
  NOT_FOUND: 404,
  PAYLOAD_TOO_LARGE: 413,
  ADMISSION_REJECT: 429,
  QUEUE_FULL_DROP_LRU: 429,
  POOL_UNREADY: 503,
  POOL_UNAVAILABLE: 503,
  MODEL_NOT_AVAILABLE: 503,
  REPLICA_EXHAUSTED: 503,
  DECODE_TIMEOUT: 500,
  WORKER_RESET: 502,
  INTERNAL: 500,
});

const ENVELOPE_KEYS = new Set(['code', 'message', 'engine', 'retriable', 'retry_after_ms', 'policy_label']);

/**
 * Problems with an error response (empty = fine): a JSON ErrorEnvelope `{code, message, …}` with
 * no other keys, a known code whose fixed status is the response status, `X-Correlation-Id`, and
 * `Retry-After` (seconds ≥ 1) + `X-Backoff-Ms` on 429/503.
 */
export function envelopeProblems(status: number, headers: Record<string, string | string[] | undefined>, bodyText: string): string[] {
  const problems: string[] = [];
  const ctype = String(headers['content-type'] ?? '');
  if (!ctype.startsWith('application/json')) problems.push(`content-type '${ctype}' is not application/json`);
  if (headers['x-correlation-id'] === undefined || headers['x-correlation-id'] === '') problems.push('no X-Correlation-Id header');
  let body: unknown;
  try {
    body = JSON.parse(bodyText);
  } catch {
    problems.push(`body is not JSON: ${bodyText.slice(0, 120)}`);
    return problems;
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    problems.push('body is not a JSON object');
    return problems;
  }
  const env = body as Record<string, unknown>;
  for (const k of Object.keys(env)) if (!ENVELOPE_KEYS.has(k)) problems.push(`unexpected envelope key '${k}'`);
  if (typeof env.message !== 'string') problems.push('message is not a string');
  if (typeof env.code !== 'string' || !(env.code in EXPECTED_ERROR_STATUS)) {
    problems.push(`unknown code ${JSON.stringify(env.code)}`);
  } else if (EXPECTED_ERROR_STATUS[env.code] !== status) {
    problems.push(`code ${env.code} has status ${EXPECTED_ERROR_STATUS[env.code]} in the table, response was ${status}`);
  }
  if (env.retriable !== undefined && typeof env.retriable !== 'boolean') problems.push('retriable is not a boolean');
  if (status === 429 || status === 503) {
    const ra = Number(headers['retry-after']);
    if (!Number.isInteger(ra) || ra < 1) problems.push(`Retry-After '${String(headers['retry-after'])}' is not an integer ≥ 1`);
    if (headers['x-backoff-ms'] === undefined) problems.push('no X-Backoff-Ms header');
  }
  return problems;
}
