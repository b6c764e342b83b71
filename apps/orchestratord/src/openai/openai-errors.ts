import { ERROR_STATUS, type ErrorCode, type OpenAiError } from '@llama-orch/contracts';

/**
 * Errors of the /v1 door in OpenAI's shape `{error: {message, type, param, code}}`, with the
 * ErrorEnvelope table's HTTP statuses (the same refusal has the same status on both doors).
 */

/** OpenAI's error `type` for a status (the names llama-server and OpenAI use). */
export function openAiErrorType(status: number): string {
  if (status === 401) return 'authentication_error';
  if (status === 404) return 'not_found_error';
  if (status === 429) return 'rate_limit_error';
  if (status === 503) return 'unavailable_error';
  if (status >= 500) return 'server_error';
  return 'invalid_request_error';
}

/** A field named at the start of a message (`temperature: …`), for errors raised below the door. */
const FIELD = /^([A-Za-z_][A-Za-z0-9_.[\]]*): /;

export interface OpenAiErrorInput {
  readonly code: ErrorCode;
  readonly message: string;
  /** The request field at fault, when known. */
  readonly param?: string | undefined;
}

/** The body for an error; `code` is OpenAI's (`model_not_found`, `invalid_value`) or the ErrorEnvelope code. */
export function openAiErrorBody(err: OpenAiErrorInput): OpenAiError {
  let param = err.param;
  if (param === undefined && err.code === 'INVALID_PARAMS') {
    const m = FIELD.exec(err.message)?.[1];
    if (m !== undefined && m !== 'body' && m !== 'path') param = m;
  }
  let code: string = err.code;
  if (err.code === 'INVALID_PARAMS') code = 'invalid_value';
  else if (err.code === 'MODEL_NOT_FOUND' || (err.code === 'NOT_FOUND' && param === 'model')) code = 'model_not_found';
  return { error: { message: err.message, type: openAiErrorType(ERROR_STATUS[err.code]), param: param ?? null, code } };
}

/** Whether a URL belongs to the /v1 door (its errors take OpenAI's shape). */
export function isOpenAiPath(url: string): boolean {
  return url === '/v1' || url.startsWith('/v1/') || url.startsWith('/v1?');
}
