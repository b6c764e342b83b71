import type { Logger } from 'pino';
import type { PoolConfig } from '@llama-orch/contracts';
import type { EngineBinary } from '@llama-orch/engine-provisioner';
import { readGgufHeader } from '@llama-orch/model-provisioner';
import { InsufficientMemoryError } from '../errors.js';
import { usedBytes } from '../node/node-memory.js';
import { projectWithFitParams } from './fit-projection.js';
import { describeProjection, memoryFactsOf, projectMemory, type MemoryProjection } from './memory-projection.js';
import type { PoolTable } from './pool-table.js';

export interface PoolMemoryOptions {
  table: PoolTable;
  /** The on-demand budget (`on_demand.memory_budget_bytes`); undefined: the node loads nothing on request. */
  budgetBytes: number | undefined;
  logger: Logger;
  /** Complete, scrubbed environment of engine processes: `llama-fit-params` runs with it. @default {} */
  engineEnv?: Readonly<Record<string, string>>;
}

/** The settings that pick a pool's engine build: pools that share them share `llama-fit-params`. */
function buildKey(pool: PoolConfig): string {
  return JSON.stringify([pool.source, pool.gpu, pool.cuda_architectures, pool.native, pool.build_flags]);
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
  readonly #engineEnv: Readonly<Record<string, string>>;
  /** `llama-fit-params` of each engine build seen (undefined: that engine has none), by {@link buildKey}. */
  readonly #tools = new Map<string, string | undefined>();
  /** Each pool's last projection and what it was made of: the tool runs once per model and engine. */
  readonly #made = new Map<string, { inputs: string; projection: Promise<MemoryProjection | undefined> }>();
  /** Pools whose fallback to the formula was logged (once per pool). */
  readonly #fellBack = new Set<string>();

  constructor({ table, budgetBytes, logger, engineEnv = {} }: PoolMemoryOptions) {
    this.#table = table;
    this.budgetBytes = budgetBytes;
    this.#log = logger;
    this.#engineEnv = engineEnv;
  }

  /**
   * Projects the engine of `pool` over the model file at `model.local_path` and records it for the
   * pool when it is in the table. With llama.cpp's `llama-fit-params` when the engine has it
   * (`engine.fit_params_path`; without `engine`, the tool of an engine built the same way seen
   * before, as for a load on request before its engine is provisioned), else with the formula
   * (memory-projection.ts; why is logged once per pool). The same model and tool again give the
   * same projection without running anything. Never rejects: an unreadable header leaves the pool
   * without a projection (logged).
   */
  project(
    pool: PoolConfig,
    model: { local_path: string },
    engine?: Pick<EngineBinary, 'fit_params_path'>,
  ): Promise<MemoryProjection | undefined> {
    const key = buildKey(pool);
    if (engine !== undefined) this.#tools.set(key, engine.fit_params_path);
    const known = engine !== undefined || this.#tools.has(key);
    const tool = this.#tools.get(key);
    const inputs = JSON.stringify([model.local_path, tool, known]);
    let made = this.#made.get(pool.id);
    if (made?.inputs !== inputs) {
      made = { inputs, projection: this.#project(pool, model.local_path, tool, known) };
      this.#made.set(pool.id, made);
    }
    return made.projection.then((projection) => {
      if (projection !== undefined && this.#table.has(pool.id))
        this.#table.setProjectedBytes(pool.id, projection.total_bytes);
      return projection;
    });
  }

  /** Forgets what was kept for a pool that left the node. */
  forget(poolId: string): void {
    this.#made.delete(poolId);
    this.#fellBack.delete(poolId);
  }

  async #project(
    pool: PoolConfig,
    path: string,
    tool: string | undefined,
    known: boolean,
  ): Promise<MemoryProjection | undefined> {
    const log = this.#log.child({ pool_id: pool.id });
    let facts;
    try {
      facts = memoryFactsOf(await readGgufHeader(path));
    } catch (err) {
      log.warn({ err }, 'memory projection failed: the model header could not be read');
      return undefined;
    }
    let projection = projectMemory(facts, pool);
    if (tool !== undefined) {
      try {
        projection = await projectWithFitParams({
          fitParams: tool,
          modelPath: path,
          facts,
          pool,
          // As the engine gets it (replica.ts): the devices the tool lists are the engine's.
          env:
            pool.device_mask !== undefined
              ? { ...this.#engineEnv, CUDA_DEVICE_ORDER: 'PCI_BUS_ID', CUDA_VISIBLE_DEVICES: pool.device_mask }
              : this.#engineEnv,
        });
      } catch (err) {
        this.#fallBack(pool.id, log, { err }, 'llama-fit-params failed; memory projected with the formula');
      }
    } else if (known) {
      this.#fallBack(pool.id, log, {}, 'the engine has no llama-fit-params; memory projected with the formula');
    }
    log.info(
      {
        memory_bytes: projection.total_bytes,
        method: projection.method,
        ...(projection.devices.length > 0 ? { devices: projection.devices } : {}),
        human: `engine memory projected: ${describeProjection(projection)}`,
      },
      'memory projected',
    );
    return projection;
  }

  #fallBack(poolId: string, log: Logger, facts: object, message: string): void {
    if (this.#fellBack.has(poolId)) return;
    this.#fellBack.add(poolId);
    log.warn(facts, message);
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
