import type { ResolvedModel } from '@llama-orch/contracts';
import { PoolBusyError } from '../errors.js';
import { waitForLeases } from './drain.js';
import type { ReloadablePool, ServedModel } from './operable-pool.js';

export interface ReloadRequest {
  ref: string;
  sha256: string | undefined;
  /** How long in-flight work may run before the old engine stops, ms. */
  deadlineMs: number;
}

/** Read afresh at each call: a shutdown may begin during any await of the reload. */
function shuttingDown(pool: ReloadablePool): boolean {
  return pool.lifecycle.operation === 'shutdown';
}

function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/**
 * Reload: drain (the new model is fetched meanwhile), stop the old engine, start one with the new
 * model as a trial; on any failure roll back to the old model and engine (pool ready again,
 * `last_error` says what failed). Throws PoolBusyError at once while the pool provisions or starts,
 * or when another operation holds it; the returned promise is the whole operation.
 */
export function reload(pool: ReloadablePool, req: ReloadRequest): Promise<void> {
  const { lifecycle } = pool;
  const state = lifecycle.state;
  if (state === 'provisioning' || state === 'starting') throw new PoolBusyError(pool.poolId, state);
  lifecycle.begin('reload');
  const wasServing = state === 'ready';
  const old: ServedModel = { ...pool.model };
  if (wasServing) lifecycle.transition('draining', `reload to ${req.ref}: draining`);
  return (async () => {
    try {
      await swap(pool, req, wasServing, old);
    } finally {
      lifecycle.end('reload');
    }
  })();
}

async function swap(
  pool: ReloadablePool,
  { ref, sha256, deadlineMs }: ReloadRequest,
  wasServing: boolean,
  old: ServedModel,
): Promise<void> {
  const { lifecycle, log } = pool;
  log.info({ from: old.ref, to: ref, human: `reloading pool ${pool.poolId}: ${old.ref} → ${ref}` }, 'reload started');
  const provisioned = pool.provision(ref, sha256, !wasServing).then(
    (m) => ({ ok: true as const, m }),
    (err: unknown) => ({ ok: false as const, err }),
  );
  if (wasServing) await waitForLeases(pool, deadlineMs);
  const p = await provisioned;
  if (shuttingDown(pool)) return;
  if (!p.ok) {
    const message = `reload to ${ref} failed: ${errorMessage(p.err)}; still serving ${old.ref}`;
    log.error({ err: p.err }, 'reload failed before the engine swap; rolled back');
    pool.recordError(message);
    if (wasServing && pool.hasEngine()) lifecycle.transition('ready', 'reload rolled back');
    else if (!wasServing) lifecycle.transition('failed', message);
    return;
  }
  await pool.stopEngine('reload');
  lifecycle.transition('starting', `reload: starting engine with ${ref}`);
  try {
    await pool.startReplica(p.m, true);
  } catch (err) {
    if (shuttingDown(pool)) return;
    await rollBack(pool, `reload to ${ref} failed: ${errorMessage(err)}; rolled back to ${old.ref}`, err, old.resolved);
    return;
  }
  pool.commitModel({ ref, sha256, resolved: p.m });
  lifecycle.end('reload');
  // The new engine was bound while the reload held the pool; it is announced now.
  if (pool.hasEngine()) lifecycle.transition('ready', `reloaded with ${ref}`);
  log.info({ model: ref, human: `pool ${pool.poolId} now serves ${ref}` }, 'reload done');
}

/** Rollback: the new engine failed; the previous model starts again (or the pool fails without one). */
async function rollBack(
  pool: ReloadablePool,
  message: string,
  err: unknown,
  previous: ResolvedModel | undefined,
): Promise<void> {
  const { lifecycle, log } = pool;
  log.error({ err }, 'new engine failed; rolling back');
  pool.recordError(message);
  await pool.stopEngine('reload rollback');
  if (previous === undefined) {
    lifecycle.transition('failed', message);
    return;
  }
  lifecycle.transition('starting', 'reload rolled back: restarting the previous engine');
  lifecycle.end('reload');
  // A normal run's start rejects only when it is stopped before its first ready (shutdown, an
  // operation after this one): nothing is left to roll back then.
  await pool.startReplica(previous, false).catch(() => undefined);
}
