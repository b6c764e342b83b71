import type { OpenAiError } from '@llama-orch/contracts';

/**
 * The refusals of the stored-response routes in OpenAI's words (its API answers these with
 * `invalid_request_error` and a 404, not the door's generic `not_found_error`): clients branch on
 * `code: previous_response_not_found` to resend the whole conversation. An id another key created
 * gets the very answer an unknown one gets (a 403 would tell another tenant it exists).
 */

/** `GET`/`DELETE /v1/responses/{id}` and its sub-routes: no such response (unknown, expired, deleted, another key's). */
export function responseNotFound(id: string): OpenAiError {
  return {
    error: { message: `Response with id '${id}' not found.`, type: 'invalid_request_error', param: null, code: null },
  };
}

/** `previous_response_id` names no response this key may continue. */
export function previousResponseNotFound(id: string): OpenAiError {
  return {
    error: {
      message: `Previous response with id '${id}' not found.`,
      type: 'invalid_request_error',
      param: 'previous_response_id',
      code: 'previous_response_not_found',
    },
  };
}
