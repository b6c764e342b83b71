import { ERROR_STATUS, type ErrorCode } from '@llama-orch/contracts';
import { openAiErrorType } from './openai-errors.js';

/**
 * Errors of the llama.cpp-shaped doors (`/rerank`, `/infill`) in llama-server's own shape,
 * `{error: {code: <HTTP status>, message, type}}` (reference §4.9), so llama.cpp clients read them
 * as they read the engine's. The statuses are the ErrorEnvelope table's.
 */
export function llamaCppErrorBody(err: {
  readonly code: ErrorCode;
  readonly message: string;
  readonly status?: number;
}): {
  error: { code: number; message: string; type: string };
} {
  const status = err.status ?? ERROR_STATUS[err.code];
  return { error: { code: status, message: err.message, type: openAiErrorType(status) } };
}

/** Whether a URL belongs to a llama.cpp-shaped door (its errors take llama-server's shape). */
export function isLlamaCppDoorPath(url: string): boolean {
  const path = url.split('?', 1)[0];
  return path === '/rerank' || path === '/infill';
}
