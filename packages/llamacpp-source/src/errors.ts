/** Stable error codes of the llama.cpp source package. Callers branch on the class, never on text. */
export type SourceErrorCode = 'SOURCE_NOT_FOUND' | 'SOURCE_FETCH_FAILED' | 'SOURCE_REF_INVALID';

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
