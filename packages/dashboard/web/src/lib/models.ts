import type { ClusterPool, DashboardSnapshot } from '@llama-orch/contracts';

/**
 * A pool's aliases. ClusterPool has none; the node's own view of the pool (its heartbeat
 * snapshot, `nodes[].pools[]`) carries them.
 */
export function poolAliases(snapshot: DashboardSnapshot, pool: Pick<ClusterPool, 'node_id' | 'pool_id'>): string[] {
  const node = snapshot.nodes.find((n) => n.node_id === pool.node_id);
  return node?.pools.find((p) => p.pool_id === pool.pool_id)?.aliases ?? [];
}

/**
 * The names the playground offers: every alias, then every model name, of the pools that can
 * serve now (ready and not draining), then of the others; each name once. Aliases first because
 * they are what operators chose to call a model (`/v1/models` lists them too).
 */
export function modelChoices(snapshot: DashboardSnapshot): string[] {
  const serving = (p: ClusterPool): boolean => p.ready && !p.draining;
  const ordered = [...snapshot.pools.filter(serving), ...snapshot.pools.filter((p) => !serving(p))];
  const names = new Set<string>();
  for (const p of ordered) for (const a of poolAliases(snapshot, p)) names.add(a);
  for (const p of ordered) for (const m of p.models) names.add(m);
  return [...names];
}
