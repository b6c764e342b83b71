import { ERROR_STATUS, RETRIABLE_BY_DEFAULT, type ErrorCode, type ErrorEnvelope } from '@llama-orch/contracts';

/** Options shared by every typed error of orchestratord. */
export interface OrchdErrorOptions {
  /** Overrides {@link RETRIABLE_BY_DEFAULT} for this instance. */
  retriable?: boolean;
  /** Suggested client wait, ms; becomes `retry_after_ms`, `X-Backoff-Ms` and `Retry-After`. */
  retryAfterMs?: number;
  /** Admission policy that produced the error (`reject`, `drop-lru`, `budget`). */
  policyLabel?: string;
  /** Engine involved, when known. */
  engine?: string;
  /** The request field at fault (the /v1 door's `error.param`); else taken from a `field: …` message. */
  param?: string;
  /** Facts for logs (never sent to clients). */
  context?: Readonly<Record<string, unknown>>;
  cause?: unknown;
}

/**
 * Base of every error that maps to an ErrorEnvelope. The HTTP status is fixed by the code
 * (contracts `ERROR_STATUS`); callers branch on the class or `code`, never on message text.
 */
export class OrchdError extends Error {
  override readonly name: string = 'OrchdError';
  readonly status: number;
  readonly retriable: boolean;
  readonly retryAfterMs: number | undefined;
  readonly policyLabel: string | undefined;
  readonly engine: string | undefined;
  readonly param: string | undefined;
  readonly context: Readonly<Record<string, unknown>>;

  constructor(
    readonly code: ErrorCode,
    message: string,
    options: OrchdErrorOptions = {},
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.status = ERROR_STATUS[code];
    this.retriable = options.retriable ?? RETRIABLE_BY_DEFAULT[code];
    this.retryAfterMs = options.retryAfterMs;
    this.policyLabel = options.policyLabel;
    this.engine = options.engine;
    this.param = options.param;
    this.context = options.context ?? {};
  }

  toEnvelope(): ErrorEnvelope {
    const env: ErrorEnvelope = { code: this.code, message: this.message, retriable: this.retriable };
    if (this.engine !== undefined) env.engine = this.engine;
    if (this.retryAfterMs !== undefined) env.retry_after_ms = Math.max(0, Math.round(this.retryAfterMs));
    if (this.policyLabel !== undefined) env.policy_label = this.policyLabel;
    return env;
  }
}

/** 400: the request is malformed; the message names the field. Not retriable. */
export class InvalidParamsError extends OrchdError {
  override readonly name = 'InvalidParamsError';
  constructor(message: string, options: OrchdErrorOptions = {}) {
    super('INVALID_PARAMS', message, options);
  }
}

/** 400: the deadline cannot be met (predicted start beyond it). */
export class DeadlineUnmetError extends OrchdError {
  override readonly name = 'DeadlineUnmetError';
  constructor(message: string, options: OrchdErrorOptions = {}) {
    super('DEADLINE_UNMET', message, options);
  }
}

/** 401: missing or wrong Bearer token. */
export class UnauthorizedError extends OrchdError {
  override readonly name = 'UnauthorizedError';
  constructor(message = 'missing or invalid bearer token') {
    super('UNAUTHORIZED', message);
  }
}

/** 403 FORBIDDEN: a valid credential without the role the route needs (a client key on a node route). */
export class ForbiddenError extends OrchdError {
  override readonly name = 'ForbiddenError';
  constructor(message: string, options: OrchdErrorOptions = {}) {
    super('FORBIDDEN', message, options);
  }
}

/** 429 ADMISSION_REJECT (policy `rate_limit`): the key spent its requests for the minute. */
export class RateLimitedError extends OrchdError {
  override readonly name = 'RateLimitedError';
  constructor(message: string, options: OrchdErrorOptions = {}) {
    super('ADMISSION_REJECT', message, { retriable: true, policyLabel: 'rate_limit', ...options });
  }
}

/** 404: unknown task, node, pool, session, catalog entry or route. */
export class NotFoundError extends OrchdError {
  override readonly name = 'NotFoundError';
  constructor(message: string, options: OrchdErrorOptions = {}) {
    super('NOT_FOUND', message, options);
  }
}

/** 413: body larger than `body_limit`. */
export class PayloadTooLargeError extends OrchdError {
  override readonly name = 'PayloadTooLargeError';
  constructor(message: string) {
    super('PAYLOAD_TOO_LARGE', message);
  }
}

/** 429: the admission queue is full (`ADMISSION_REJECT` under `reject`, `QUEUE_FULL_DROP_LRU` under `drop-lru`). */
export class QueueFullError extends OrchdError {
  override readonly name = 'QueueFullError';
  constructor(code: 'ADMISSION_REJECT' | 'QUEUE_FULL_DROP_LRU', message: string, options: OrchdErrorOptions = {}) {
    super(code, message, options);
  }
}

/** 429 ADMISSION_REJECT (policy `budget`): the session has spent its token budget. */
export class BudgetSpentError extends OrchdError {
  override readonly name = 'BudgetSpentError';
  constructor(message: string, options: OrchdErrorOptions = {}) {
    super('ADMISSION_REJECT', message, { retriable: false, policyLabel: 'budget', ...options });
  }
}

/** 503: no pool serves (or provisions) the model now: its pools are down, or a catalog model is not loaded. */
export class ModelNotAvailableError extends OrchdError {
  override readonly name = 'ModelNotAvailableError';
  constructor(message: string, options: OrchdErrorOptions = {}) {
    super('MODEL_NOT_AVAILABLE', message, options);
  }
}

/** 404 MODEL_NOT_FOUND: the name is neither a catalog entry or alias nor served by any pool (spec 67). */
export class ModelNotFoundError extends OrchdError {
  override readonly name = 'ModelNotFoundError';
  constructor(message: string, options: OrchdErrorOptions = {}) {
    super('MODEL_NOT_FOUND', message, options);
  }
}

/** 409 CONFLICT: the request contradicts the current state (an alias of another model, a static pool, a pin, `max_loaded`). */
export class ConflictError extends OrchdError {
  override readonly name = 'ConflictError';
  constructor(message: string, options: OrchdErrorOptions = {}) {
    super('CONFLICT', message, options);
  }
}

/** 503 INSUFFICIENT_MEMORY, retriable: no node has room for the model now. */
export class InsufficientMemoryError extends OrchdError {
  override readonly name: string = 'InsufficientMemoryError';
  constructor(message: string, options: OrchdErrorOptions = {}) {
    super('INSUFFICIENT_MEMORY', message, options);
  }
}

/**
 * 503 INSUFFICIENT_MEMORY where waiting cannot help: no node loads models on request at all (none
 * reports on-demand memory), so a task is refused rather than queued for room.
 */
export class NoLoadingNodeError extends InsufficientMemoryError {
  override readonly name = 'NoLoadingNodeError';
}

/** 502 MODEL_LOAD_FAILED: every node asked refused or failed the load (the message says why, per node). */
export class ModelLoadFailedError extends OrchdError {
  override readonly name = 'ModelLoadFailedError';
  constructor(message: string, options: OrchdErrorOptions = {}) {
    super('MODEL_LOAD_FAILED', message, options);
  }
}

/** 503: the pool (or its node) is unknown or unreachable. */
export class PoolUnavailableError extends OrchdError {
  override readonly name = 'PoolUnavailableError';
  constructor(message: string, options: OrchdErrorOptions = {}) {
    super('POOL_UNAVAILABLE', message, options);
  }
}

/** 503: the pool exists but cannot take work (failed, draining, stopped). */
export class PoolUnreadyError extends OrchdError {
  override readonly name = 'PoolUnreadyError';
  constructor(message: string, options: OrchdErrorOptions = {}) {
    super('POOL_UNREADY', message, options);
  }
}

/** 500: a bug or an unexpected failure. */
export class InternalError extends OrchdError {
  override readonly name = 'InternalError';
  constructor(message = 'internal error', options: OrchdErrorOptions = {}) {
    super('INTERNAL', message, options);
  }
}

/**
 * 503 STORE_UNAVAILABLE, retriable (Retry-After 1 s): the cluster store (Redis/Valkey) did not answer — unreachable, timed out, or
 * restarted while the command ran. Raised instead of waiting: a request never hangs on the store.
 */
export class StoreUnavailableError extends OrchdError {
  override readonly name = 'StoreUnavailableError';
  constructor(message: string, options: OrchdErrorOptions = {}) {
    super('STORE_UNAVAILABLE', message, { retriable: true, retryAfterMs: 1000, ...options });
  }
}

/** Start-up configuration is invalid; `problems` lists every issue (one per line in `message`). */
export class ConfigError extends Error {
  override readonly name = 'ConfigError';
  readonly code = 'CONFIG_INVALID';
  constructor(readonly problems: readonly string[]) {
    super(`invalid orchestratord configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
  }
}
