import type { Logger } from 'pino';
import type { PoolConfig } from '@llama-orch/contracts';
import { InsufficientMemoryError } from '../errors.js';
import { usedBytes } from '../node/node-memory.js';
import { describeProjection, projectModelFile, type MemoryProjection } from './memory-projection.js';
import type { PoolTable } from './pool-table.js';

export interface PoolMemoryOptions {
  table: PoolTable;
  /** The on-demand budget (`on_demand.memory_budget_bytes`); undefined: the node loads nothing on request. */
  budgetBytes: number | undefined;
  logger: Logger;
}

const MiB = 1024 * 1024;
const mib = (bytes: number): string => `${Math.round(bytes / MiB)} MiB`;

/**
 * The node's memory as its pools see it (spec 50, memory): each pool's projection goes into the
 * pool table (its `memory_bytes` until the engine runs), and a load on request is admitted only
 * when its projection fits in the on-demand budget next to what every pool of the node takes
 * (static pools included: they share the host). The one place of that rule: the 503 of
 * `POST /v2/pools` and the check a load makes before its engine starts both come here.
 */
export class PoolMemory {
  readonly budgetBytes: number | undefined;
  readonly #table: PoolTable;
  readonly #log: Logger;

  constructor({ table, budgetBytes, logger }: PoolMemoryOptions) {
    this.#table = table;
    this.budgetBytes = budgetBytes;
    this.#log = logger;
  }

  /**
   * Projects the engine of `pool` over the model file at `path` and records it for the pool when it
   * is in the table. Never rejects: an unreadable header leaves the pool without a projection (logged).
   */
  async project(pool: PoolConfig, model: { local_path: string }): Promise<MemoryProjection | undefined> {
    const log = this.#log.child({ pool_id: pool.id });
    try {
      const projection = await projectModelFile(model.local_path, pool);
      if (this.#table.has(pool.id)) this.#table.setProjectedBytes(pool.id, projection.total_bytes);
      log.info(
        { memory_bytes: projection.total_bytes, human: `engine memory projected: ${describeProjection(projection)}` },
        'memory projected',
      );
      return projection;
    } catch (err) {
      log.warn({ err }, 'memory projection failed: the model header could not be read');
      return undefined;
    }
  }

  /** What the node's pools take now (their `memory_bytes`), bytes; `except` left out. */
  usedBytes(except?: string): number {
    return usedBytes(this.#table.statuses().filter((s) => s.pool_id !== except));
  }

  /**
   * Throws {@link InsufficientMemoryError} when `projection` is more than the budget minus what the
   * node's other pools take (every figure in its message). Synchronous: a caller that registers the
   * pool right after cannot be overtaken by another load.
   */
  admit(poolId: string, projection: MemoryProjection): void {
    const budget = this.budgetBytes ?? 0;
    const used = this.usedBytes(poolId);
    const free = Math.max(0, budget - used);
    if (projection.total_bytes <= free) return;
    throw new InsufficientMemoryError(
      poolId,
      `pool '${poolId}' does not fit: its engine needs ${describeProjection(projection)}; ` +
        `the node has ${mib(free)} free of its ${mib(budget)} budget (its pools take ${mib(used)})`,
      { need_bytes: projection.total_bytes, budget_bytes: budget, used_bytes: used },
    );
  }
}
