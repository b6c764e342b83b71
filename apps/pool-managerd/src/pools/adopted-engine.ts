import type { Logger } from 'pino';
import type { HandoffFile } from '@llama-orch/contracts';
import type { LlamaServerClient } from '@llama-orch/llamacpp-adapter';
import type { ProbedEngine } from '../handoff/adoption.js';
import { EngineMonitor } from '../handoff/engine-monitor.js';
import type { PoolManagerMetrics } from '../support/metrics.js';
import type { PoolTable } from './pool-table.js';

export interface AdoptedEngineOptions {
  table: PoolTable;
  poolId: string;
  /** The handoff file that named the engine. */
  path: string;
  handoff: HandoffFile;
  /** What the engine answered to `/props` when it was probed. */
  props: ProbedEngine;
  client: LlamaServerClient;
  /** Health probe interval, ms. @default 2000 */
  probeMs?: number | undefined;
  metrics: PoolManagerMetrics;
  logger: Logger;
}

/**
 * An external engine attached to a pool (adoption, for configured and unconfigured pools alike):
 * bound with what the engine itself answered, the pool `ready`; from then on its `/health` is
 * polled: down → unbound and `failed`, up again → bound and `ready`. While an operation holds the
 * pool, the operation owns its state and health changes are not applied. pool-managerd never
 * stops an adopted engine: {@link release} only stops watching and unbinds it.
 */
export class AdoptedEngine {
  readonly poolId: string;
  readonly path: string;
  readonly handoff: HandoffFile;
  readonly #table: PoolTable;
  readonly #monitor: EngineMonitor;

  constructor({ table, poolId, path, handoff, props, client, probeMs, metrics, logger }: AdoptedEngineOptions) {
    this.poolId = poolId;
    this.path = path;
    this.handoff = handoff;
    this.#table = table;
    const binding = {
      url: handoff.url,
      replica_id: handoff.replica_id,
      engine_version: props.build_info,
      slots_total: props.total_slots,
      ctx: props.n_ctx,
      pid: handoff.pid,
      mode: 'external' as const,
      capabilities: props.capabilities,
    };
    table.bindEngine(poolId, binding);
    table.setModels(poolId, [handoff.model.id]);
    table.setLastError(poolId, undefined);
    table.transition(poolId, 'ready', `adopted external engine ${handoff.url}`);
    this.#monitor = new EngineMonitor({
      client,
      logger,
      ...(probeMs !== undefined ? { intervalMs: probeMs } : {}),
      onHealth: (h) => metrics.healthChecks.inc({ pool_id: poolId, result: h }),
      onDown: (why) => {
        if (table.operation(poolId) !== undefined) return;
        table.unbindEngine(poolId);
        table.setLastError(poolId, why);
        table.transition(poolId, 'failed', why);
      },
      onUp: () => {
        if (table.operation(poolId) !== undefined) return;
        table.bindEngine(poolId, binding);
        table.setLastError(poolId, undefined);
        table.transition(poolId, 'ready', 'external engine healthy again');
      },
    });
  }

  /** Stops watching and unbinds the engine (it keeps running). The caller moves the pool's state. Idempotent. */
  release(): void {
    if (this.#monitor.state === 'closed') return;
    this.#monitor.close();
    this.#table.unbindEngine(this.poolId);
  }
}
