import { readdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { HandoffFileSchema, type HandoffFile } from '@llama-orch/contracts';
import type { LlamaServerClient } from '@llama-orch/llamacpp-adapter';
import { HandoffError } from '../errors.js';
import { probeExternalEngine } from '../handoff/adoption.js';
import type { PoolManagerMetrics } from '../support/metrics.js';
import { AdoptedEngine } from './adopted-engine.js';
import { ExternalPool } from './external-pool.js';
import type { ManagedPool } from './managed-pool.js';
import type { PoolTable } from './pool-table.js';

export interface HandoffRouterOptions {
  /** `<runtime>/engines`. */
  enginesDir: string;
  table: PoolTable;
  metrics: PoolManagerMetrics;
  /** The pool manager's logger. */
  log: Logger;
  /** The manager's managed pools (read live). */
  managed: ReadonlyMap<string, ManagedPool>;
  /** The manager's pools made of adopted external engines (this router adds and replaces them). */
  external: Map<string, ExternalPool>;
  engineClient: (url: string) => Promise<LlamaServerClient>;
  /** How long an adopted engine may take to answer /health 200, ms. */
  adoptTimeoutMs: number;
  /** Probe interval of adopted external engines, ms. */
  externalProbeMs: number | undefined;
}

/**
 * Where each handoff file goes (spec 50, handoff files): a managed file is our own engine's (or a
 * stale one, refused); an external file is adopted into the configured pool of its id, or becomes
 * a pool of its own; a removed file releases an adopted engine or is written again by its pool.
 */
export class HandoffRouter {
  readonly #o: HandoffRouterOptions;

  constructor(options: HandoffRouterOptions) {
    this.#o = options;
  }

  /** Managed handoff files left by an earlier run describe engines that no longer exist. */
  removeStaleManagedHandoffs(): void {
    let names: string[];
    try {
      names = readdirSync(this.#o.enginesDir).filter((n) => n.endsWith('.json'));
    } catch {
      return;
    }
    for (const name of names) {
      const path = join(this.#o.enginesDir, name);
      try {
        const h = HandoffFileSchema.parse(JSON.parse(readFileSync(path, 'utf8')));
        if (h.provisioning_mode === 'managed') {
          rmSync(path, { force: true });
          this.#o.log.info({ path, pid: h.pid }, 'removed managed handoff file of a previous run');
        }
      } catch {
        // Not ours to judge here: the watcher rejects it with a reason.
      }
    }
  }

  /** A handoff file was accepted by the watcher: our own engine's, or an external engine to adopt. */
  async onHandoff(path: string, h: HandoffFile, signal: AbortSignal): Promise<void> {
    const managed = this.#o.managed.get(h.pool_id);
    if (h.provisioning_mode === 'managed') {
      if (managed?.ownsHandoff(h) === true) {
        this.#o.table.touch(h.pool_id);
        return;
      }
      throw new HandoffError(`managed handoff for pool ${h.pool_id} pid ${h.pid}, which this daemon does not run`, {
        poolId: h.pool_id,
        pid: h.pid,
      });
    }
    if (managed !== undefined) {
      await managed.adopt(path, h, signal);
      this.#o.log.info(
        { pool_id: h.pool_id, url: h.url, human: `adopted external engine ${h.url} into configured pool ${h.pool_id}` },
        'external engine adopted',
      );
      return;
    }
    await this.#adoptAsPool(path, h, signal);
  }

  /** An external engine for a pool id this node does not configure: a pool of its own. */
  async #adoptAsPool(path: string, h: HandoffFile, signal: AbortSignal): Promise<void> {
    const poolId = h.pool_id;
    const client = await this.#o.engineClient(h.url);
    const props = await probeExternalEngine(client, h, {
      timeoutMs: this.#o.adoptTimeoutMs,
      signal,
      onHealth: (r) => this.#o.metrics.healthChecks.inc({ pool_id: poolId, result: r }),
    });
    this.#o.table.register(poolId, {
      managed: false,
      models: [h.model.id],
      deterministic: false,
      ctx: props.n_ctx,
      slotsTotal: props.total_slots,
      state: 'stopped',
      reason: 'adopting',
    });
    const busy = this.#o.table.operation(poolId);
    if (busy !== undefined) throw new HandoffError(`pool ${poolId} is busy with ${busy}`, { poolId });
    this.#o.external.get(poolId)?.close();
    const logger = this.#o.log.child({ pool_id: poolId });
    const engine = new AdoptedEngine({
      table: this.#o.table,
      poolId,
      path,
      handoff: h,
      props,
      client,
      probeMs: this.#o.externalProbeMs,
      metrics: this.#o.metrics,
      logger,
    });
    const pool = new ExternalPool(this.#o.table, engine, logger, () => {
      if (this.#o.external.get(poolId) === pool) this.#o.external.delete(poolId);
    });
    this.#o.external.set(poolId, pool);
    this.#o.log.info(
      {
        pool_id: poolId,
        url: h.url,
        slots: props.total_slots,
        human: `adopted external engine ${h.url} as pool ${poolId}`,
      },
      'external engine adopted',
    );
  }

  /** A handoff file went: an adopted engine is released; a managed pool writes its own again. */
  async onRemoved(path: string): Promise<void> {
    for (const pool of this.#o.external.values()) {
      if (pool.path !== path) continue;
      pool.handoffRemoved();
      return;
    }
    for (const p of this.#o.managed.values()) await p.handoffRemoved(path);
  }
}
