import type { PoolState } from '@llama-orch/contracts';
import { InvalidTransitionError, PoolBusyError } from '../errors.js';
import type { PoolOperation } from '../operations/operable-pool.js';
import { systemClock, type Clock } from '@llama-orch/daemon-support';

/**
 * Allowed transitions. Why each state exists:
 * - `provisioning`: engine build / model fetch in progress (nothing to talk to yet).
 * - `starting`: an engine process is spawned (or about to be, after a crash backoff) and has not
 *   answered `/health` 200; never dispatchable.
 * - `ready`: engine healthy, leases accepted.
 * - `draining`: no new leases; in-flight work runs until the deadline (drain, reload, unload).
 * - `stopped`: no engine on purpose (after drain, unload, shutdown, removed external handoff).
 * - `failed`: provisioning failed or the circuit breaker is open; `last_error` says why.
 *
 * Every state may go to `draining` for an unload: a pool loaded on request leaves the node from
 * wherever it is (a load still fetching its model or starting its engine is abandoned).
 */
const TRANSITIONS: Readonly<Record<PoolState, readonly PoolState[]>> = Object.freeze({
  // Progress updates re-enter the same state with a new reason.
  provisioning: ['provisioning', 'starting', 'failed', 'stopped', 'draining'],
  // starting → starting: crash backoff or a new attempt; → failed: breaker opened or a reload trial failed.
  starting: ['starting', 'ready', 'failed', 'stopped', 'draining'],
  // ready → starting: the engine exited (restart pending); → failed: an adopted engine went away.
  ready: ['ready', 'draining', 'starting', 'failed', 'stopped'],
  // draining → provisioning/starting: reload fetches and starts the new engine; → ready: reload rolled back.
  draining: ['draining', 'provisioning', 'starting', 'ready', 'stopped', 'failed'],
  // stopped → ready: an external engine was adopted into a configured pool without one.
  stopped: ['stopped', 'provisioning', 'starting', 'ready', 'draining'],
  // failed → starting: half-open trial; → provisioning: retry or reload; → ready: adoption.
  failed: ['failed', 'provisioning', 'starting', 'ready', 'stopped', 'draining'],
});

/** The states of a pool's bring-up (see {@link PoolStateMachine.firstProvisioning}). */
const BRINGING_UP: ReadonlySet<PoolState> = new Set<PoolState>(['provisioning', 'starting']);

export function canTransition(from: PoolState, to: PoolState): boolean {
  return TRANSITIONS[from].includes(to);
}

export type { PoolOperation };

export interface PoolStateChange {
  from: PoolState;
  to: PoolState;
  reason: string | undefined;
  at: Date;
}

/**
 * One pool's lifecycle — the single authority on it: the state plus its human reason, and the
 * operation holding the pool. Transitions are explicit: an illegal one throws
 * {@link InvalidTransitionError} (a bug in the caller, never skipped); listeners see every change.
 */
export class PoolStateMachine {
  readonly poolId: string;
  #state: PoolState;
  #reason: string | undefined;
  #updatedAt: Date;
  #operation: PoolOperation | undefined;
  #broughtUp: boolean;
  readonly #clock: Clock;
  readonly #listeners = new Set<(change: PoolStateChange) => void>();

  constructor(poolId: string, initial: PoolState = 'provisioning', reason?: string, clock: Clock = systemClock) {
    this.poolId = poolId;
    this.#clock = clock;
    this.#state = initial;
    this.#reason = reason;
    this.#updatedAt = new Date(clock.now());
    this.#broughtUp = !BRINGING_UP.has(initial);
  }

  /**
   * Still in its first provisioning: since it was created the pool has only been `provisioning` or
   * `starting` (never ready, failed, stopped or draining). A restart or reload later is not this.
   * pool-managerd's `/readyz` waits for no pool to be in it.
   */
  get firstProvisioning(): boolean {
    return !this.#broughtUp;
  }

  get state(): PoolState {
    return this.#state;
  }

  get reason(): string | undefined {
    return this.#reason;
  }

  get updatedAt(): Date {
    return this.#updatedAt;
  }

  /** The operation holding the pool, if any. */
  get operation(): PoolOperation | undefined {
    return this.#operation;
  }

  /** Moves to `to` (a same-state call only updates the reason). */
  transition(to: PoolState, reason?: string): void {
    const from = this.#state;
    if (!canTransition(from, to)) throw new InvalidTransitionError(this.poolId, from, to);
    this.#state = to;
    if (!BRINGING_UP.has(to)) this.#broughtUp = true;
    this.#reason = reason;
    this.#updatedAt = new Date(this.#clock.now());
    const change: PoolStateChange = { from, to, reason, at: this.#updatedAt };
    for (const l of this.#listeners) l(change);
  }

  /**
   * Claims the pool for `operation`. Throws {@link PoolBusyError} while another one holds it;
   * `shutdown` always succeeds and stays until the end.
   */
  begin(operation: PoolOperation): void {
    if (this.#operation === 'shutdown') {
      if (operation === 'shutdown') return;
      throw new PoolBusyError(this.poolId, 'shutdown');
    }
    if (operation !== 'shutdown' && this.#operation !== undefined)
      throw new PoolBusyError(this.poolId, this.#operation);
    this.#operation = operation;
  }

  /** Ends `operation` if it still holds the pool (a shutdown that superseded it stays). */
  end(operation: PoolOperation): void {
    if (this.#operation === operation && operation !== 'shutdown') this.#operation = undefined;
  }

  onChange(listener: (change: PoolStateChange) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }
}
