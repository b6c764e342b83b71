/**
 * Stable error codes of the llama.cpp source package. Callers branch on the class, never on text.
 * `SOURCE_PATCH_FAILED`: one of the carried patches does not apply to the source (`context.patch` names it).
 */
export type SourceErrorCode = 'SOURCE_NOT_FOUND' | 'SOURCE_FETCH_FAILED' | 'SOURCE_REF_INVALID' | 'SOURCE_PATCH_FAILED';

export class SourceError extends Error {
  override readonly name = 'SourceError';
  constructor(
    readonly code: SourceErrorCode,
    message: string,
    readonly context: Readonly<Record<string, unknown>> = {},
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}
