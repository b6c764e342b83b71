import type { OperablePool } from './operable-pool.js';

/** How often a drain looks at the pool's leases, ms. */
const LEASE_POLL_MS = 20;

/**
 * Waits until the pool holds no lease or `deadlineMs` passed; then aborts what is left (those
 * streams end with an error). The one drain wait: drain and reload both use it.
 */
export async function waitForLeases(pool: Pick<OperablePool, 'leases' | 'log'>, deadlineMs: number): Promise<void> {
  const until = Date.now() + deadlineMs;
  while (pool.leases.active() > 0 && Date.now() < until) {
    await new Promise((r) => setTimeout(r, LEASE_POLL_MS).unref());
  }
  const left = pool.leases.active();
  if (left > 0) {
    pool.log.warn({ leases: left, deadline_ms: deadlineMs }, 'drain deadline passed; aborting in-flight work');
    pool.leases.abort('drain deadline passed');
  }
}

/**
 * Drain (spec 50): no new leases, in-flight work runs until `deadlineMs`, then the engine stops
 * (an adopted one is released, not killed) and the pool is `stopped`. Throws PoolBusyError at once
 * when another operation holds the pool; the returned promise is the whole operation.
 */
export function drain(pool: OperablePool, deadlineMs: number): Promise<void> {
  const { lifecycle } = pool;
  lifecycle.begin('drain');
  if (lifecycle.state === 'ready') lifecycle.transition('draining', `draining; deadline ${deadlineMs} ms`);
  return (async () => {
    try {
      pool.cancelBackground('drained');
      await waitForLeases(pool, deadlineMs);
      await pool.stopEngine('drained');
      lifecycle.transition('stopped', pool.drainedReason);
      pool.log.info({ human: `pool ${pool.poolId} drained and stopped` }, 'pool drained');
    } finally {
      lifecycle.end('drain');
    }
  })();
}
