import type { Logger } from 'pino';
import type { PoolState, ResolvedModel } from '@llama-orch/contracts';

/**
 * What can hold a pool besides supervision: an operator's drain or reload, orchestratord's unload
 * of a pool it loaded, or the daemon's shutdown. While one holds it, the operation decides when the
 * pool is ready again (an unloaded pool never is); shutdown supersedes the others and is never
 * superseded.
 */
export type PoolOperation = 'drain' | 'reload' | 'unload' | 'shutdown';

/** A pool's lifecycle as operations see it: the pool table's state machine, the one authority. */
export interface PoolLifecycle {
  readonly state: PoolState;
  readonly operation: PoolOperation | undefined;
  /** Claims the pool; throws PoolBusyError while another operation holds it. */
  begin(operation: PoolOperation): void;
  /** Ends `operation` if it still holds the pool. */
  end(operation: PoolOperation): void;
  /** Throws InvalidTransitionError for a transition the state machine does not allow. */
  transition(to: PoolState, reason?: string): void;
}

/** The pool's leases (held slots). */
export interface PoolLeases {
  active(): number;
  /** Aborts every lease: their streams end with an error; holders still release them. */
  abort(reason: string): void;
}

/** The operation API of any pool (configured or adopted): enough to drain it. */
export interface OperablePool {
  readonly poolId: string;
  readonly log: Logger;
  readonly lifecycle: PoolLifecycle;
  readonly leases: PoolLeases;
  /** The `stopped` reason once drained (an adopted engine is released, never stopped). */
  readonly drainedReason: string;
  /** Stops work that would start an engine behind the operation's back (provisioning, its retry). */
  cancelBackground(reason: string): void;
  /** Ends what serves the pool: its own engine stopped, or an adopted engine released. Unbinds it. */
  stopEngine(reason: string): Promise<void>;
}

/** The model a configured pool serves: the configured one until a reload succeeds. */
export interface ServedModel {
  ref: string;
  sha256: string | undefined;
  /** Resolved file; undefined until the first provisioning succeeded. */
  resolved: ResolvedModel | undefined;
}

/** A configured pool: it can also load another model. */
export interface ReloadablePool extends OperablePool {
  readonly model: ServedModel;
  /** Whether an engine is bound to the pool now. */
  hasEngine(): boolean;
  /**
   * Resolves `ref` (and the engine binary when `withEngine`: the pool then shows `provisioning`).
   * Aborted by {@link OperablePool.cancelBackground} and by shutdown.
   */
  provision(ref: string, sha256: string | undefined, withEngine: boolean): Promise<ResolvedModel>;
  /**
   * Starts a new supervised engine run for `model`. Settles once its first engine is ready; a trial
   * run rejects when its first start fails. Both reject when the run is stopped first.
   */
  startReplica(model: ResolvedModel, trial: boolean): Promise<void>;
  /** The new model serves: remembered for restarts and cache pinning; `last_error` cleared. */
  commitModel(model: ServedModel & { resolved: ResolvedModel }): void;
  /** Why an operation failed: shown as `last_error`, and still after the pool is ready again. */
  recordError(message: string): void;
}
