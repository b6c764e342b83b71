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
  STORE_UNAVAILABLE: 503,
  DECODE_TIMEOUT: 500,
  WORKER_RESET: 502,
  INTERNAL: 500,
  MODEL_NOT_FOUND: 404,
  MODEL_LOAD_FAILED: 502,
  INSUFFICIENT_MEMORY: 503,
  CONFLICT: 409,
});

const ENVELOPE_KEYS = new Set(['code', 'message', 'engine', 'retriable', 'retry_after_ms', 'policy_label']);

type Headers = Record<string, string | string[] | undefined>;

/**
 * What every error response shares, whatever its door's body shape: JSON content, `X-Correlation-Id`,
 * and `Retry-After` (seconds ≥ 1) + `X-Backoff-Ms` on 429/503. Calls `body` with the parsed JSON
 * object for the shape's own checks.
 */
function errorResponseProblems(
  status: number,
  headers: Headers,
  bodyText: string,
  body: (json: Record<string, unknown>) => string[],
): string[] {
  const problems: string[] = [];
  const ctype = String(headers['content-type'] ?? '');
  if (!ctype.startsWith('application/json')) problems.push(`content-type '${ctype}' is not application/json`);
  if (headers['x-correlation-id'] === undefined || headers['x-correlation-id'] === '')
    problems.push('no X-Correlation-Id header');
  let json: unknown;
  try {
    json = JSON.parse(bodyText);
  } catch {
    return [...problems, `body is not JSON: ${bodyText.slice(0, 120)}`];
  }
  if (typeof json !== 'object' || json === null || Array.isArray(json))
    return [...problems, 'body is not a JSON object'];
  problems.push(...body(json as Record<string, unknown>));
  if (status === 429 || status === 503) {
    const ra = Number(headers['retry-after']);
    if (!Number.isInteger(ra) || ra < 1)
      problems.push(`Retry-After '${String(headers['retry-after'])}' is not an integer ≥ 1`);
    if (headers['x-backoff-ms'] === undefined) problems.push('no X-Backoff-Ms header');
  }
  return problems;
}

/**
 * Problems with an error response (empty = fine): a JSON ErrorEnvelope `{code, message, …}` with
 * no other keys, a known code whose fixed status is the response status, and the shared headers
 * ({@link errorResponseProblems}).
 */
export function envelopeProblems(status: number, headers: Headers, bodyText: string): string[] {
  return errorResponseProblems(status, headers, bodyText, (env) => {
    const problems: string[] = [];
    for (const k of Object.keys(env)) if (!ENVELOPE_KEYS.has(k)) problems.push(`unexpected envelope key '${k}'`);
    if (typeof env.message !== 'string') problems.push('message is not a string');
    if (typeof env.code !== 'string' || !(env.code in EXPECTED_ERROR_STATUS)) {
      problems.push(`unknown code ${JSON.stringify(env.code)}`);
    } else if (EXPECTED_ERROR_STATUS[env.code] !== status) {
      problems.push(
        `code ${env.code} has status ${EXPECTED_ERROR_STATUS[env.code]} in the table, response was ${status}`,
      );
    }
    if (env.retriable !== undefined && typeof env.retriable !== 'boolean') problems.push('retriable is not a boolean');
    return problems;
  });
}

/** OpenAI's error `type` for a status, as the /v1 door writes it (test data, like the table above). */
const OPENAI_ERROR_TYPE: Readonly<Record<number, string>> = Object.freeze({
  401: 'authentication_error',
  404: 'not_found_error',
  429: 'rate_limit_error',
  503: 'unavailable_error',
});

/** Whether a request path belongs to the /v1 door, whose errors take OpenAI's shape instead of the ErrorEnvelope. */
export function isOpenAiDoorPath(path: string): boolean {
  return path === '/v1' || path.startsWith('/v1/') || path.startsWith('/v1?');
}

/**
 * Problems with an error response of the /v1 door (empty = fine): JSON `{error: {message, type,
 * param, code}}` with no other keys, `type` OpenAI's name for the status, `param` a string or null,
 * `code` a string, and the shared headers.
 */
export function openAiErrorProblems(status: number, headers: Headers, bodyText: string): string[] {
  return errorResponseProblems(status, headers, bodyText, (outer) => {
    const problems: string[] = [];
    for (const k of Object.keys(outer)) if (k !== 'error') problems.push(`unexpected key '${k}' beside 'error'`);
    const err = outer.error as Record<string, unknown> | undefined;
    if (typeof err !== 'object' || err === null) return [...problems, "no 'error' object"];
    if (typeof err.message !== 'string') problems.push('error.message is not a string');
    const type = OPENAI_ERROR_TYPE[status] ?? (status >= 500 ? 'server_error' : 'invalid_request_error');
    if (err.type !== type)
      problems.push(`error.type ${JSON.stringify(err.type)} for status ${status} (expected '${type}')`);
    if (err.param !== null && typeof err.param !== 'string') problems.push('error.param is neither a string nor null');
    if (typeof err.code !== 'string') problems.push('error.code is not a string');
    return problems;
  });
}

/** Anthropic's error `type` for a status, as the Messages door writes it (test data). */
const ANTHROPIC_ERROR_TYPE: Readonly<Record<number, string>> = Object.freeze({
  400: 'invalid_request_error',
  401: 'authentication_error',
  403: 'permission_error',
  404: 'not_found_error',
  413: 'request_too_large',
  429: 'rate_limit_error',
  503: 'overloaded_error',
});

/** Whether a request path belongs to the Anthropic Messages door (`/v1/messages…`), whose errors take Anthropic's shape. */
export function isAnthropicDoorPath(path: string): boolean {
  return path === '/v1/messages' || path.startsWith('/v1/messages/') || path.startsWith('/v1/messages?');
}

/**
 * Problems with an error response of the Messages door (empty = fine): JSON `{type: 'error',
 * error: {type, message}}` with no other keys, `error.type` Anthropic's name for the status, and
 * the shared headers.
 */
export function anthropicErrorProblems(status: number, headers: Headers, bodyText: string): string[] {
  return errorResponseProblems(status, headers, bodyText, (outer) => {
    const problems: string[] = [];
    for (const k of Object.keys(outer)) if (k !== 'type' && k !== 'error') problems.push(`unexpected key '${k}'`);
    if (outer.type !== 'error') problems.push(`type ${JSON.stringify(outer.type)} is not 'error'`);
    const err = outer.error as Record<string, unknown> | undefined;
    if (typeof err !== 'object' || err === null) return [...problems, "no 'error' object"];
    if (typeof err.message !== 'string') problems.push('error.message is not a string');
    const type = ANTHROPIC_ERROR_TYPE[status] ?? (status >= 500 ? 'api_error' : 'invalid_request_error');
    if (err.type !== type)
      problems.push(`error.type ${JSON.stringify(err.type)} for status ${status} (expected '${type}')`);
    return problems;
  });
}
