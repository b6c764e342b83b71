import type { ErrorCode } from '@llama-orch/contracts';

/**
 * Stable codes of the llama-server adapter. Callers branch on the class (or `code`), never on text.
 * `errorCode` is the wire code (contracts' ErrorCode) a service should put in its envelope/event.
 */
export type AdapterErrorCode =
  | 'ENGINE_UNREACHABLE'
  | 'ENGINE_LOADING'
  | 'ENGINE_REJECTED'
  | 'ENGINE_PROTOCOL'
  | 'WORKER_RESET'
  | 'ABORTED'
  | 'CLIENT_CLOSED';

export class AdapterError extends Error {
  override readonly name: string = 'AdapterError';
  constructor(
    readonly code: AdapterErrorCode,
    /** Wire error code for envelopes and `error` events. */
    readonly errorCode: ErrorCode,
    /** Whether the same request may succeed if retried (possibly elsewhere). */
    readonly retriable: boolean,
    message: string,
    readonly context: Readonly<Record<string, unknown>> = {},
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** No HTTP answer: connection refused/reset, DNS, timeout. The engine is down or not listening yet. */
export class EngineUnreachableError extends AdapterError {
  override readonly name = 'EngineUnreachableError';
  constructor(message: string, context: Readonly<Record<string, unknown>> = {}, options?: { cause?: unknown }) {
    super('ENGINE_UNREACHABLE', 'POOL_UNAVAILABLE', true, message, context, options);
  }
}

/** The engine answered 503 (model still loading). */
export class EngineLoadingError extends AdapterError {
  override readonly name = 'EngineLoadingError';
  constructor(message: string, context: Readonly<Record<string, unknown>> = {}) {
    super('ENGINE_LOADING', 'POOL_UNAVAILABLE', true, message, context);
  }
}

/**
 * The engine refused the request with a JSON error (before the first token as an HTTP status, or
 * as a `data: {"error":…}` frame after streaming began). The message is the engine's own.
 */
export class EngineRejectedError extends AdapterError {
  override readonly name = 'EngineRejectedError';
  constructor(
    readonly status: number,
    /** llama-server's error `type` (e.g. `exceed_context_size_error`), when given. */
    readonly engineType: string | undefined,
    message: string,
    context: Readonly<Record<string, unknown>> = {},
  ) {
    const errorCode: ErrorCode = status === 400 ? 'INVALID_PARAMS' : status === 503 ? 'POOL_UNAVAILABLE' : 'INTERNAL';
    super('ENGINE_REJECTED', errorCode, errorCode !== 'INVALID_PARAMS' && errorCode !== 'INTERNAL', message, {
      ...context,
      status,
      engineType,
    });
  }
}

/** The engine's reply did not have the documented shape (not llama-server, or an incompatible version). */
export class EngineProtocolError extends AdapterError {
  override readonly name = 'EngineProtocolError';
  constructor(message: string, context: Readonly<Record<string, unknown>> = {}, options?: { cause?: unknown }) {
    super('ENGINE_PROTOCOL', 'INTERNAL', false, message, context, options);
  }
}

/**
 * A completion stream broke: the body ended (or the socket failed) before the final `stop:true`
 * frame. llama-server shows an engine crash, SIGTERM and SIGKILL this way (reference §3).
 */
export class WorkerResetError extends AdapterError {
  override readonly name = 'WorkerResetError';
  constructor(message: string, context: Readonly<Record<string, unknown>> = {}, options?: { cause?: unknown }) {
    super('WORKER_RESET', 'WORKER_RESET', true, message, context, options);
  }
}

/** The caller's AbortSignal fired; the socket was closed, which is llama-server's cancel. */
export class CompletionAbortedError extends AdapterError {
  override readonly name = 'CompletionAbortedError';
  constructor(context: Readonly<Record<string, unknown>> = {}, options?: { cause?: unknown }) {
    super('ABORTED', 'INTERNAL', false, 'completion aborted by the caller', context, options);
  }
}

/** The client was closed; no new requests. */
export class ClientClosedError extends AdapterError {
  override readonly name = 'ClientClosedError';
  constructor() {
    super('CLIENT_CLOSED', 'INTERNAL', false, 'llama-server client is closed');
  }
}
