import type { Logger } from 'pino';
import {
  PoolConfigSchema,
  type OnDemandConfig,
  type PoolConfig,
  type PoolLoadRequest,
  type PoolStatus,
} from '@llama-orch/contracts';
import type { ModelProvisioner } from '@llama-orch/model-provisioner';
import { ConflictError, InsufficientMemoryError, PoolBusyError, PoolNotFoundError } from '../errors.js';
import { unload } from '../operations/unload.js';
import type { PoolManagerMetrics } from '../support/metrics.js';
import type { ManagedPool } from './managed-pool.js';
import type { MemoryProjection } from './memory-projection.js';
import type { PoolMemory } from './pool-memory.js';
import type { PoolTable } from './pool-table.js';

export interface PoolLoadsOptions {
  /** The node's on-demand settings; undefined: it loads nothing on request (every load is a 409). */
  onDemand: OnDemandConfig | undefined;
  table: PoolTable;
  memory: PoolMemory;
  metrics: PoolManagerMetrics;
  logger: Logger;
  /** Where a model already is on this host, fetching nothing (the projection at admission). */
  models: Pick<ModelProvisioner, 'cachedFile'>;
  /** Makes the managed pool of an admitted load (registered in the table) and starts it. */
  open: (pool: PoolConfig) => ManagedPool;
  /** The managed pool `poolId`, if this node runs one. */
  pool: (poolId: string) => ManagedPool | undefined;
  /** Forgets an unloaded pool: the manager's pools, then the table. */
  forget: (poolId: string) => void;
  /** The manager is shutting down: no loads; an unloaded pool is left for the shutdown to stop. */
  closing: () => boolean;
}

/** The PoolConfig of a load: the request's model and policy on the node's on-demand engine settings. */
export function loadPoolConfig(req: PoolLoadRequest, od: OnDemandConfig): PoolConfig {
  return PoolConfigSchema.parse({
    id: req.pool_id,
    model: req.model,
    aliases: req.aliases,
    ...(req.sha256 !== undefined ? { sha256: req.sha256 } : {}),
    ctx: req.ctx,
    slots: req.slots,
    gpu: req.gpu,
    embeddings: req.serve === 'embeddings',
    reranking: req.serve === 'reranking',
    source: od.source,
    cuda_architectures: od.cuda_architectures,
    native: od.native,
    ...(od.threads !== undefined ? { threads: od.threads } : {}),
  });
}

type LoadOutcome = 'ready' | 'failed' | 'canceled';

/**
 * Models on demand, the node's part (spec 50, loads on request): `load` admits a pool for a
 * catalog model (refusals first, typed) and starts it through the same ManagedPool path as the
 * YAML's pools; `unload` drains one and forgets it. Each load's outcome is counted once.
 */
export class PoolLoads {
  readonly #o: PoolLoadsOptions;
  readonly #log: Logger;
  /** Pools being unloaded (a second DELETE answers with their status). */
  readonly #unloading = new Set<string>();
  /** Loads whose outcome is not counted yet: the unsubscribe of their lifecycle listener. */
  readonly #pending = new Map<string, () => void>();

  constructor(options: PoolLoadsOptions) {
    this.#o = options;
    this.#log = options.logger.child({ component: 'pool-loads' });
  }

  /**
   * Admits and starts a load; resolves with the new pool's status (`provisioning`). Refusals:
   * {@link ConflictError} (no `on_demand`, pool id taken), {@link InsufficientMemoryError} (`max_pools`
   * loads already, or the projection does not fit), PoolBusyError (shutting down). A model not on
   * this host yet has no projection before it is fetched: it is admitted, and checked again before
   * its engine starts (a load that does not fit then ends `failed` with the figures in `last_error`).
   */
  async load(req: PoolLoadRequest): Promise<PoolStatus> {
    try {
      return await this.#load(req);
    } catch (err) {
      this.#o.metrics.loads.inc({ outcome: 'refused' });
      throw err;
    }
  }

  async #load(req: PoolLoadRequest): Promise<PoolStatus> {
    const od = this.#o.onDemand;
    if (od === undefined)
      throw new ConflictError('this node loads no model on request: its config has no on_demand section', {
        poolId: req.pool_id,
      });
    const pool = loadPoolConfig(req, od);
    this.#refuse(pool.id, od);
    const projection = await this.#projectIfHere(pool);
    // Again after the await: another load, an unload or the shutdown may have come meanwhile.
    this.#refuse(pool.id, od);
    if (projection !== undefined) this.#o.memory.admit(pool.id, projection);
    this.#o.open(pool);
    if (projection !== undefined) this.#o.table.setProjectedBytes(pool.id, projection.total_bytes);
    this.#watchOutcome(pool.id);
    this.#log.info(
      {
        pool_id: pool.id,
        model: pool.model,
        ctx: pool.ctx,
        slots: pool.slots,
        ...(projection !== undefined ? { memory_bytes: projection.total_bytes } : {}),
        human: `loading ${pool.model} as pool ${pool.id}`,
      },
      'pool load accepted',
    );
    return this.#o.table.status(pool.id);
  }

  /** The synchronous refusals: shutting down, the id taken, `max_pools` loads already. */
  #refuse(poolId: string, od: OnDemandConfig): void {
    if (this.#o.closing()) throw new PoolBusyError(poolId, 'shutdown');
    if (this.#o.table.has(poolId))
      throw new ConflictError(`pool id '${poolId}' is taken on this node; unload it first or pick another`, {
        poolId,
      });
    const loaded = this.#o.table.statuses().filter((s) => s.origin === 'catalog').length;
    // 503, not 409: the limit frees up as soon as a load is unloaded, like memory does.
    if (loaded >= od.max_pools)
      throw new InsufficientMemoryError(
        poolId,
        `this node already runs ${loaded} pools loaded on request, its max_pools; unload one first`,
        { loaded, max_pools: od.max_pools },
      );
  }

  /** The projection of a model already on this host; undefined when it is not here yet (or unreadable). */
  async #projectIfHere(pool: PoolConfig): Promise<MemoryProjection | undefined> {
    let file;
    try {
      file = await this.#o.models.cachedFile(pool.model, pool.sha256 !== undefined ? { sha256: pool.sha256 } : {});
    } catch (err) {
      // A malformed ref fails provisioning with its reason (last_error); nothing to project now.
      this.#log.warn({ err, pool_id: pool.id }, 'model lookup failed; admitted without a projection');
      return undefined;
    }
    return file === undefined ? undefined : this.#o.memory.project(pool, { local_path: file.path });
  }

  /** Counts the load once: its first `ready` or `failed`, or `canceled` when it is unloaded first. */
  #watchOutcome(poolId: string): void {
    const off = this.#o.table.lifecycle(poolId).onChange((change) => {
      if (change.to === 'ready' || change.to === 'failed') this.#settle(poolId, change.to);
    });
    this.#pending.set(poolId, off);
  }

  #settle(poolId: string, outcome: LoadOutcome): void {
    const off = this.#pending.get(poolId);
    if (off === undefined) return;
    off();
    this.#pending.delete(poolId);
    this.#o.metrics.loads.inc({ outcome });
  }

  /**
   * Starts the unload of a pool loaded on request and answers its status (`draining`); the pool
   * leaves the table once its engine stopped. Idempotent while it unloads. Throws
   * {@link PoolNotFoundError}, {@link ConflictError} for a pool of the node's own (YAML or adopted),
   * PoolBusyError while a drain, reload or the shutdown holds it.
   */
  unload(poolId: string, deadlineMs: number): PoolStatus {
    const pool = this.#o.pool(poolId);
    if (pool === undefined || pool.origin !== 'catalog') {
      if (!this.#o.table.has(poolId)) throw new PoolNotFoundError(poolId);
      throw new ConflictError(
        `pool '${poolId}' is one of this node's own (its YAML, or an adopted engine); only pools loaded on request (POST /v2/pools) are unloaded`,
        { poolId },
      );
    }
    if (this.#unloading.has(poolId)) return this.#o.table.status(poolId);
    const op = unload(pool, deadlineMs);
    this.#unloading.add(poolId);
    this.#settle(poolId, 'canceled');
    op.then(
      () => {
        this.#unloading.delete(poolId);
        this.#o.metrics.unloads.inc();
        // The shutdown stops (and keeps) what it holds; only a finished unload leaves the table.
        if (!this.#o.closing()) this.#o.forget(poolId);
      },
      (err: unknown) => {
        this.#unloading.delete(poolId);
        this.#log.error({ err, pool_id: poolId }, 'unload failed; the pool stays listed');
      },
    );
    return this.#o.table.status(poolId);
  }
}
