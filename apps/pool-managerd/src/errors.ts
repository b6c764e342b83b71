import { ERROR_STATUS, RETRIABLE_BY_DEFAULT, type ErrorCode } from '@llama-orch/contracts';

/** Stable codes of pool-managerd's own errors. Callers branch on the class, never on message text. */
export type PoolManagerErrorCode =
  | 'CONFIG_INVALID'
  | 'POOL_NOT_FOUND'
  | 'DISPATCH_NOT_HELD'
  | 'POOL_UNREADY'
  | 'REPLICA_EXHAUSTED'
  | 'POOL_BUSY'
  | 'POOL_NOT_MANAGED'
  | 'ENGINE_NOT_REACHED'
  | 'INVALID_TRANSITION'
  | 'ENGINE_SPAWN_FAILED'
  | 'ENGINE_READINESS_FAILED'
  | 'HANDOFF_INVALID'
  | 'RUNTIME_DIR_LOCKED'
  | 'UNAUTHORIZED'
  | 'NODE_REGISTRATION_FAILED'
  | 'CONFLICT'
  | 'INSUFFICIENT_MEMORY';

export class PoolManagerError extends Error {
  override readonly name: string = 'PoolManagerError';
  constructor(
    readonly code: PoolManagerErrorCode,
    /** Wire code for the ErrorEnvelope; fixes the HTTP status via ERROR_STATUS. */
    readonly errorCode: ErrorCode,
    message: string,
    readonly context: Readonly<Record<string, unknown>> = {},
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }

  get status(): number {
    return ERROR_STATUS[this.errorCode];
  }

  get retriable(): boolean {
    return RETRIABLE_BY_DEFAULT[this.errorCode];
  }
}

/** The YAML config is missing, unreadable or invalid; the message lists every issue. */
export class ConfigError extends PoolManagerError {
  override readonly name = 'ConfigError';
  constructor(message: string, context: Readonly<Record<string, unknown>> = {}, options?: { cause?: unknown }) {
    super('CONFIG_INVALID', 'INVALID_PARAMS', message, context, options);
  }
}

export class PoolNotFoundError extends PoolManagerError {
  override readonly name = 'PoolNotFoundError';
  constructor(readonly poolId: string) {
    super('POOL_NOT_FOUND', 'NOT_FOUND', `pool '${poolId}' not found`, { poolId });
  }
}

/**
 * No re-attachable dispatch of that task is held on that pool: unknown task id, never
 * re-attachable, already delivered, cancelled, or its re-attach window passed (404 NOT_FOUND).
 */
export class DispatchNotHeldError extends PoolManagerError {
  override readonly name = 'DispatchNotHeldError';
  constructor(
    readonly poolId: string,
    readonly taskId: string,
  ) {
    super('DISPATCH_NOT_HELD', 'NOT_FOUND', `no dispatch of task '${taskId}' is held on pool '${poolId}'`, {
      poolId,
      taskId,
    });
  }
}

/** A refusal the caller may retry after `retryAfterMs` (503 with `Retry-After`). */
export abstract class RetriableRefusal extends PoolManagerError {
  constructor(
    code: 'POOL_UNREADY' | 'REPLICA_EXHAUSTED',
    readonly poolId: string,
    reason: string,
    readonly retryAfterMs: number,
  ) {
    super(code, code, `pool '${poolId}' cannot take work: ${reason}`, { poolId, reason });
  }
}

/**
 * The pool itself cannot serve now (provisioning, starting, draining, stopped, failed, or its
 * engine just exited): 503 POOL_UNREADY. orchestratord re-queues the task.
 */
export class PoolUnreadyError extends RetriableRefusal {
  override readonly name = 'PoolUnreadyError';
  constructor(poolId: string, reason: string, retryAfterMs: number) {
    super('POOL_UNREADY', poolId, reason, retryAfterMs);
  }
}

/**
 * The pool is ready but every slot is leased (503 REPLICA_EXHAUSTED): a caller may retry shortly or
 * go elsewhere, whereas POOL_UNREADY says the pool itself cannot serve.
 */
export class ReplicaExhaustedError extends RetriableRefusal {
  override readonly name = 'ReplicaExhaustedError';
  constructor(poolId: string, slotsTotal: number, retryAfterMs: number) {
    super('REPLICA_EXHAUSTED', poolId, `all ${slotsTotal} slots leased`, retryAfterMs);
  }
}

/** No engine of this daemon was ever reached at `url`, so there is no client for it (503). */
export class EngineNotReachedError extends PoolManagerError {
  override readonly name = 'EngineNotReachedError';
  constructor(readonly url: string) {
    super('ENGINE_NOT_REACHED', 'POOL_UNREADY', `no engine of this daemon was reached at ${url}`, { url });
  }
}

/** Another operation (drain, reload, shutdown) holds the pool. */
export class PoolBusyError extends PoolManagerError {
  override readonly name = 'PoolBusyError';
  constructor(
    readonly poolId: string,
    operation: string,
  ) {
    super('POOL_BUSY', 'POOL_UNAVAILABLE', `pool '${poolId}' is busy with ${operation}`, { poolId, operation });
  }
}

/** The pool runs an adopted external engine; pool-managerd cannot load another model into it. */
export class PoolNotManagedError extends PoolManagerError {
  override readonly name = 'PoolNotManagedError';
  constructor(readonly poolId: string) {
    super(
      'POOL_NOT_MANAGED',
      'INVALID_PARAMS',
      `pool '${poolId}' runs an external engine adopted from a handoff file; reload applies to configured pools`,
      { poolId },
    );
  }
}

/**
 * The request contradicts what the node is (409 CONFLICT, not retriable): a load on a node without
 * `on_demand`, a pool id already taken, an unload of a pool the node's YAML configures, a reload of
 * a pool loaded on request.
 */
export class ConflictError extends PoolManagerError {
  override readonly name = 'ConflictError';
  constructor(message: string, context: Readonly<Record<string, unknown>> = {}) {
    super('CONFLICT', 'CONFLICT', message, context);
  }
}

/**
 * A load does not fit now (503 INSUFFICIENT_MEMORY, retriable with Retry-After): its projected
 * memory is more than the on-demand budget minus what the node's pools take, or the node already
 * runs `max_pools` pools loaded on request. Room comes back when a pool unloads; orchestratord may
 * unload an idle one or place the load elsewhere.
 */
export class InsufficientMemoryError extends PoolManagerError {
  override readonly name = 'InsufficientMemoryError';
  constructor(
    readonly poolId: string,
    message: string,
    context: Readonly<Record<string, unknown>> = {},
  ) {
    super('INSUFFICIENT_MEMORY', 'INSUFFICIENT_MEMORY', message, { poolId, ...context });
  }
}

/** A pool state change that the state machine does not allow (a programming error, not input). */
export class InvalidTransitionError extends PoolManagerError {
  override readonly name = 'InvalidTransitionError';
  constructor(poolId: string, from: string, to: string) {
    super('INVALID_TRANSITION', 'INTERNAL', `pool '${poolId}': transition ${from} → ${to} not allowed`, {
      poolId,
      from,
      to,
    });
  }
}

/** The engine process could not be spawned at all (binary missing, not executable). */
export class EngineSpawnError extends PoolManagerError {
  override readonly name = 'EngineSpawnError';
  constructor(message: string, context: Readonly<Record<string, unknown>> = {}, options?: { cause?: unknown }) {
    super('ENGINE_SPAWN_FAILED', 'POOL_UNAVAILABLE', message, context, options);
  }
}

/** The engine did not reach `/health` 200: it exited while loading, or the readiness timeout passed. */
export class EngineReadinessError extends PoolManagerError {
  override readonly name = 'EngineReadinessError';
  constructor(message: string, context: Readonly<Record<string, unknown>> = {}, options?: { cause?: unknown }) {
    super('ENGINE_READINESS_FAILED', 'POOL_UNAVAILABLE', message, context, options);
  }
}

/** A handoff file was rejected (unparseable, wrong shape, unreachable engine, conflicting pool). */
export class HandoffError extends PoolManagerError {
  override readonly name = 'HandoffError';
  constructor(message: string, context: Readonly<Record<string, unknown>> = {}, options?: { cause?: unknown }) {
    super('HANDOFF_INVALID', 'INVALID_PARAMS', message, context, options);
  }
}

/** Another live pool-managerd owns the runtime dir. */
export class RuntimeDirLockedError extends PoolManagerError {
  override readonly name = 'RuntimeDirLockedError';
  constructor(dir: string, pid: number) {
    super('RUNTIME_DIR_LOCKED', 'INTERNAL', `runtime dir ${dir} is in use by pool-managerd pid ${pid}`, { dir, pid });
  }
}

export class UnauthorizedError extends PoolManagerError {
  override readonly name = 'UnauthorizedError';
  constructor() {
    super('UNAUTHORIZED', 'UNAUTHORIZED', 'missing or invalid Bearer token');
  }
}

/** orchestratord refused the registration (non-retriable 4xx other than 404). */
export class NodeRegistrationError extends PoolManagerError {
  override readonly name = 'NodeRegistrationError';
  constructor(message: string, context: Readonly<Record<string, unknown>> = {}, options?: { cause?: unknown }) {
    super('NODE_REGISTRATION_FAILED', 'INTERNAL', message, context, options);
  }
}
