import type { CatalogModelEntry } from '../store/catalog-store.js';
import { isCopy, isStaticPool, poolNames, type FleetNode, type FleetPool } from './fleet.js';

/** The pools that serve a catalog entry under any of its names. */
export function poolsOfEntry(
  entry: Pick<CatalogModelEntry, 'id' | 'aliases'>,
  pools: readonly FleetPool[],
): FleetPool[] {
  const names = new Set([entry.id, ...entry.aliases]);
  return pools.filter((p) => poolNames(p).some((n) => names.has(n)));
}

/**
 * Since when the pool has been idle (ms since the epoch), or undefined while a slot is leased: by
 * the node's last report, and by this replica's own leases, which may be newer (a task placed since).
 */
export function idleSince(p: FleetPool): number | undefined {
  if (p.free < p.slots_total) return undefined;
  const at = p.snapshot.idle_since;
  if (at === undefined) return undefined;
  const ms = Date.parse(at);
  return Number.isNaN(ms) ? undefined : ms;
}

/**
 * The copy to unload so that `entry` fits (spec 67, Eviction): a copy the catalog loaded, ready,
 * idle (no slot leased, so no task in flight), not draining, on an online node that loads on
 * request, of another model whose copies stay at or above its pin without it, and whose priority
 * is not above `entry`'s. Lowest priority first, then the longest idle (LRU). Undefined when none
 * may go: the load is then refused, never a busy, loading or pinned copy broken.
 */
export function evictionVictim(
  entry: CatalogModelEntry,
  entries: readonly CatalogModelEntry[],
  pools: readonly FleetPool[],
  nodes: readonly FleetNode[],
): FleetPool | undefined {
  const onDemand = new Set(nodes.filter((n) => n.state === 'online' && n.memory !== undefined).map((n) => n.node_id));
  const own = new Set(poolsOfEntry(entry, pools));
  let best: { pool: FleetPool; priority: number; since: number } | undefined;
  for (const e of entries) {
    if (e.id === entry.id || e.policy.priority > entry.policy.priority) continue;
    const mine = poolsOfEntry(e, pools);
    const copies = mine.filter(isCopy).length;
    if (copies - 1 < e.policy.pin) continue;
    for (const p of mine) {
      const since = idleSince(p);
      if (own.has(p) || isStaticPool(p) || !onDemand.has(p.node_id)) continue;
      if (p.state !== 'ready' || p.draining || since === undefined) continue;
      const better =
        best === undefined ||
        e.policy.priority < best.priority ||
        (e.policy.priority === best.priority && since < best.since);
      if (better) best = { pool: p, priority: e.policy.priority, since };
    }
  }
  return best?.pool;
}

/**
 * The busy copy to swap out for `entry` when no idle one may go (spec 67, Waiting for room): a copy
 * the catalog loaded, ready and not draining, on an online node that loads on request, of another
 * model whose priority is not above `entry`'s and whose copies stay at or above its pin without it;
 * never a copy still loading. Lowest priority first, then the most free slots (the least work to
 * finish). Its work in flight finishes: it is drained, not broken.
 */
export function swapVictim(
  entry: CatalogModelEntry,
  entries: readonly CatalogModelEntry[],
  pools: readonly FleetPool[],
  nodes: readonly FleetNode[],
): { pool: FleetPool; entry: CatalogModelEntry } | undefined {
  const onDemand = new Set(nodes.filter((n) => n.state === 'online' && n.memory !== undefined).map((n) => n.node_id));
  let best: { pool: FleetPool; entry: CatalogModelEntry; free: number } | undefined;
  for (const e of entries) {
    if (e.id === entry.id || e.policy.priority > entry.policy.priority) continue;
    const mine = poolsOfEntry(e, pools);
    if (mine.filter(isCopy).length - 1 < e.policy.pin) continue;
    for (const p of mine) {
      if (isStaticPool(p) || !onDemand.has(p.node_id) || p.state !== 'ready' || p.draining) continue;
      const free = p.snapshot.slots_free;
      const better =
        best === undefined ||
        e.policy.priority < best.entry.policy.priority ||
        (e.policy.priority === best.entry.policy.priority && free > best.free);
      if (better) best = { pool: p, entry: e, free };
    }
  }
  return best === undefined ? undefined : { pool: best.pool, entry: best.entry };
}
