import { waitForLeases } from './drain.js';
import type { OperablePool } from './operable-pool.js';

/**
 * Unload (spec 50): a pool loaded on request leaves the node. It is `draining` at once, whatever
 * its state (a load still fetching its model or starting its engine is abandoned: provisioning is
 * aborted, and the provisioners leave no half-written file); no new leases; in-flight work runs
 * until `deadlineMs`, then what is left is aborted; the engine stops (SIGTERM, SIGKILL after the
 * stop timeout) and its handoff file goes; the pool ends `stopped` for the caller to forget.
 * Throws PoolBusyError at once when another operation holds the pool; the returned promise is the
 * whole operation.
 */
export function unload(pool: OperablePool, deadlineMs: number): Promise<void> {
  const { lifecycle } = pool;
  lifecycle.begin('unload');
  lifecycle.transition('draining', `unloading; deadline ${deadlineMs} ms`);
  pool.cancelBackground('unloaded');
  return (async () => {
    try {
      await waitForLeases(pool, deadlineMs);
      await pool.stopEngine('unloaded');
      // A shutdown that superseded the unload stops the pool itself.
      if (lifecycle.operation === 'unload') lifecycle.transition('stopped', 'unloaded');
      pool.log.info({ human: `pool ${pool.poolId} unloaded` }, 'pool unloaded');
    } finally {
      lifecycle.end('unload');
    }
  })();
}
