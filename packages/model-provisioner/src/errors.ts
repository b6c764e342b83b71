/**
 * Stable error codes of the model provisioner. Callers branch on `code` (or on `retriable`),
 * never on message text.
 *
 * - `INVALID_MODEL_REF`: the ref (or a catalog id) does not match the grammar, or is unsafe.
 * - `MODEL_NOT_FOUND`: the file / URL does not exist (local ENOENT, HTTP 404/410).
 * - `MODEL_FETCH_FAILED`: the download failed (401/403, other 4xx, retries exhausted on 5xx or
 *   network errors).
 * - `DIGEST_MISMATCH`: the bytes do not hash to the expected sha256.
 * - `INVALID_GGUF`: the file is not a GGUF file, is truncated, or is not a loadable model.
 * - `CACHE_UNWRITABLE`: the cache directory cannot be created or written.
 * - `DEADLINE_EXCEEDED`: the caller's AbortSignal fired before the model was ready.
 * - `PROVISIONER_CLOSED`: `ensure()` after `close()`.
 */
export type ModelProvisionErrorCode =
  | 'INVALID_MODEL_REF'
  | 'MODEL_NOT_FOUND'
  | 'MODEL_FETCH_FAILED'
  | 'DIGEST_MISMATCH'
  | 'INVALID_GGUF'
  | 'CACHE_UNWRITABLE'
  | 'DEADLINE_EXCEEDED'
  | 'PROVISIONER_CLOSED';

/** Codes whose cause may go away by itself (a later attempt can succeed). */
const RETRIABLE: ReadonlySet<ModelProvisionErrorCode> = new Set(['MODEL_FETCH_FAILED', 'DEADLINE_EXCEEDED']);

export class ModelProvisionError extends Error {
  override readonly name = 'ModelProvisionError';
  /** True when trying again later may succeed (network trouble, a deadline). */
  readonly retriable: boolean;
  constructor(
    readonly code: ModelProvisionErrorCode,
    message: string,
    readonly context: Readonly<Record<string, unknown>> = {},
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.retriable = RETRIABLE.has(code);
  }
}

/** Maps filesystem errors on cache paths to `CACHE_UNWRITABLE`; anything else is rethrown as is. */
export function cacheError(err: unknown, path: string): unknown {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  if (
    code === 'EACCES' ||
    code === 'EPERM' ||
    code === 'EROFS' ||
    code === 'ENOSPC' ||
    code === 'ENOTDIR' ||
    code === 'EDQUOT'
  ) {
    return new ModelProvisionError(
      'CACHE_UNWRITABLE',
      `model cache not writable (${code}): ${path}`,
      { path },
      { cause: err },
    );
  }
  return err;
}
