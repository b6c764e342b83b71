import { ERROR_STATUS, type AnthropicError, type ErrorCode } from '@llama-orch/contracts';

/**
 * Errors of the Anthropic door in Anthropic's shape `{type: 'error', error: {type, message}}`, with
 * the ErrorEnvelope table's HTTP statuses (the same refusal has the same status on every door).
 */

/** Anthropic's error `type` for a status. */
export function anthropicErrorType(status: number): string {
  if (status === 400) return 'invalid_request_error';
  if (status === 401) return 'authentication_error';
  if (status === 403) return 'permission_error';
  if (status === 404) return 'not_found_error';
  if (status === 413) return 'request_too_large';
  if (status === 429) return 'rate_limit_error';
  if (status === 503) return 'overloaded_error';
  if (status >= 500) return 'api_error';
  return 'invalid_request_error';
}

export function anthropicErrorBody(err: { readonly code: ErrorCode; readonly message: string }): AnthropicError {
  return { type: 'error', error: { type: anthropicErrorType(ERROR_STATUS[err.code]), message: err.message } };
}

/** Whether a URL belongs to the Anthropic door (its errors, 401s included, take Anthropic's shape). */
export function isAnthropicPath(url: string): boolean {
  return url === '/v1/messages' || url.startsWith('/v1/messages/') || url.startsWith('/v1/messages?');
}
