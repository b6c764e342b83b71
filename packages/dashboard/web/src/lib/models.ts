import type { ClusterPool, DashboardSnapshot } from '@llama-orch/contracts';

/**
 * The names the playground offers: every alias, then every model name, of the pools that can
 * serve now (ready and not draining), then of the others; each name once. Aliases first because
 * they are what operators chose to call a model (`/v1/models` lists them too).
 */
export function modelChoices(snapshot: DashboardSnapshot): string[] {
  const serving = (p: ClusterPool): boolean => p.ready && !p.draining;
  const ordered = [...snapshot.pools.filter(serving), ...snapshot.pools.filter((p) => !serving(p))];
  const names = new Set<string>();
  for (const p of ordered) for (const a of p.aliases ?? []) names.add(a);
  for (const p of ordered) for (const m of p.models) names.add(m);
  return [...names];
}
