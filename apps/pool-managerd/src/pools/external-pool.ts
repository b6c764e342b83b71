import type { Logger } from 'pino';
import type { OperablePool, PoolLeases, PoolLifecycle } from '../operations/operable-pool.js';
import type { AdoptedEngine } from './adopted-engine.js';
import type { PoolTable } from './pool-table.js';

/**
 * A pool this node does not configure, made of an external engine adopted from a handoff file. It
 * exists while the engine is attached: a drain or the removal of the file releases the engine
 * (never stops it) and ends the pool object (its facts stay in the table, `stopped`).
 */
export class ExternalPool implements OperablePool {
  readonly poolId: string;
  readonly log: Logger;
  readonly drainedReason = 'drained (external engine released, not stopped)';
  readonly leases: PoolLeases;
  readonly #table: PoolTable;
  readonly #engine: AdoptedEngine;
  readonly #onReleased: () => void;

  constructor(table: PoolTable, engine: AdoptedEngine, logger: Logger, onReleased: () => void) {
    this.poolId = engine.poolId;
    this.log = logger;
    this.#table = table;
    this.#engine = engine;
    this.#onReleased = onReleased;
    this.leases = {
      active: () => table.activeLeases(engine.poolId),
      abort: (reason) => table.abortLeases(engine.poolId, reason),
    };
  }

  get lifecycle(): PoolLifecycle {
    return this.#table.lifecycle(this.poolId);
  }

  /** The handoff file that named the engine. */
  get path(): string {
    return this.#engine.path;
  }

  cancelBackground(): void {
    // Nothing runs in the background of an adopted engine but its health probe (released with it).
  }

  async stopEngine(): Promise<void> {
    this.#engine.release();
    this.#onReleased();
  }

  /** The handoff file was removed: the engine is released and the pool `stopped`. */
  handoffRemoved(): void {
    this.#engine.release();
    this.#onReleased();
    this.#table.transition(this.poolId, 'stopped', 'external handoff file removed');
    this.log.info({ path: this.path }, 'external engine released: handoff file removed');
  }

  /** Shutdown: stops watching the engine (it keeps running). */
  close(): void {
    this.#engine.release();
  }
}
