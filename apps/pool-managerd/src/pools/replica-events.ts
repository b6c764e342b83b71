import type { Logger } from 'pino';
import type { PoolLifecycle } from '../operations/operable-pool.js';
import type { ReplicaEvents } from '../replicas/replica.js';
import type { PoolManagerMetrics } from '../support/metrics.js';
import type { PoolTable } from './pool-table.js';

/** What a managed pool's replica events act on. */
export interface ReplicaEventsTarget {
  poolId: string;
  replicaId: string;
  log: Logger;
  lifecycle: PoolLifecycle;
  table: PoolTable;
  metrics: PoolManagerMetrics;
  /** Consecutive failures that open the breaker (for the `last_error` text). */
  breakerThreshold: number;
  /** Shown as `last_error` once ready again (a reload's rollback must stay visible). */
  stickyError: () => string | undefined;
  /** The run's first process exists, or its first start failed. */
  spawned: () => void;
}

/**
 * A managed pool's replica events → pool facts and state transitions. Only the current run
 * reports (a stopped replica reports nothing: see Replica.stop), so these never move a pool for a
 * retired engine.
 */
export function replicaEvents(t: ReplicaEventsTarget): ReplicaEvents {
  const { table, poolId, lifecycle } = t;
  return {
    starting: ({ attempt, restart }) => {
      if (restart) {
        table.countRestart(poolId);
        t.metrics.restarts.inc({ pool_id: poolId });
      }
      lifecycle.transition('starting', restart ? `restarting engine (attempt ${attempt})` : 'starting engine');
    },
    spawned: () => t.spawned(),
    bound: (engine) => table.bindEngine(poolId, { ...engine, replica_id: t.replicaId, mode: 'managed' }),
    ready: (engine) => {
      table.setLastError(poolId, t.stickyError());
      // An operation holding the pool (a reload's trial) announces readiness itself when it is done.
      if (lifecycle.operation === undefined) lifecycle.transition('ready', 'engine healthy');
      const { pid, url, engine_version, slots_total: slots } = engine;
      t.log.info(
        {
          pid,
          url,
          engine_version,
          engine_patches: engine.engine_patches ?? [],
          slots,
          human: `pool ${poolId} ready on ${url}`,
        },
        'pool ready',
      );
    },
    exited: (what) => {
      table.unbindEngine(poolId);
      lifecycle.transition('starting', `engine exited (${what}); restart pending`);
    },
    failure: (error, delayMs) => {
      t.spawned();
      table.setLastError(poolId, error);
      if (delayMs !== undefined) lifecycle.transition('starting', `engine failed; restart in ${delayMs} ms: ${error}`);
    },
    open: (error, retryAt) => {
      table.setLastError(poolId, `circuit open after ${t.breakerThreshold} consecutive failures: ${error}`);
      lifecycle.transition('failed', `circuit open; next trial at ${new Date(retryAt).toISOString()}`);
    },
    breaker: (state) => table.setBreaker(poolId, state),
  };
}
