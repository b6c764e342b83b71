import { isCopy, isStaticPool, poolKey, poolNames, type Fleet } from './fleet.js';

/** What becomes of the tasks waiting for a model whose load failed. */
export interface LoadFailureSink {
  /** Ends the queued tasks of the model `names` name; `message` says why. */
  failLoadWaiters(names: ReadonlySet<string>, message: string): number;
}

/**
 * Ends the tasks waiting for a catalog model whose pool failed to load (spec 67) as soon as any
 * replica's fleet view shows it, whoever started the load: a failed pool stays `failed` until it is
 * unloaded, so the queue would otherwise hold them until their deadlines. A model with another copy
 * (ready or preparing) keeps its tasks. Reads the fleet on its changes (heartbeats), never per task.
 * Returns the unsubscribe.
 */
export function endWaitersOfFailedLoads(fleet: Fleet, sink: LoadFailureSink): () => void {
  /** Failed pools already handled: each failure ends its waiters once. */
  const seen = new Set<string>();
  return fleet.subscribe(() => {
    const pools = fleet.pools();
    const failedNow = new Set<string>();
    for (const p of pools) {
      if (p.state !== 'failed' || isStaticPool(p)) continue;
      const key = poolKey(p);
      failedNow.add(key);
      if (seen.has(key)) continue;
      seen.add(key);
      const names = new Set(poolNames(p));
      if (pools.some((q) => isCopy(q) && poolNames(q).some((n) => names.has(n)))) continue;
      const why = p.snapshot.last_error ?? 'no reason reported';
      sink.failLoadWaiters(names, `loading model '${p.models[0] ?? '?'}' on pool ${key} failed: ${why}`);
    }
    for (const key of seen) if (!failedNow.has(key)) seen.delete(key);
  });
}
