import type { ClusterModel } from '@llama-orch/contracts';
import type { CatalogModelEntry } from '../store/catalog-store.js';
import { isStaticPool, poolKey, poolNames, type FleetPool } from './fleet.js';

/**
 * The cluster's models as `GET /v2/catalog/models` shows them: each model once, whether a catalog
 * entry, a model static pools serve, or both. Pools that share a name (a pool lists its ref, then
 * the node's catalog id, then its aliases) serve one model; such a set of pools belongs to the
 * catalog entry one of whose names (ref or alias) it lists, else it is a model of its own, named by
 * the first ref of its first pool (pool id, node id order).
 */
export interface ModelGroup<P extends FleetPool = FleetPool> {
  readonly id: string;
  readonly entry: CatalogModelEntry | undefined;
  /** Every name the model answers to (refs and aliases of the entry and of its pools). */
  readonly names: ReadonlySet<string>;
  readonly pools: readonly P[];
}

/** Groups the entries and the pools into models (sorted by id). */
export function groupModels<P extends FleetPool>(
  entries: readonly CatalogModelEntry[],
  pools: readonly P[],
): ModelGroup<P>[] {
  const groups = new Map<string, { entry: CatalogModelEntry | undefined; names: Set<string>; pools: P[] }>();
  for (const e of entries) groups.set(e.id, { entry: e, names: new Set([e.id, ...e.aliases]), pools: [] });
  const owner = new Map<string, string>();
  for (const e of entries) for (const n of [e.id, ...e.aliases]) owner.set(n, e.id);
  for (const set of poolSets(pools)) {
    const names = new Set(set.flatMap((p) => poolNames(p)));
    const entryId = [...names].map((n) => owner.get(n)).find((id) => id !== undefined);
    const id = entryId ?? (set[0]?.models[0] as string);
    const group = groups.get(id) ?? { entry: undefined, names: new Set<string>(), pools: [] };
    for (const n of names) group.names.add(n);
    group.pools.push(...set);
    groups.set(id, group);
  }
  return [...groups.entries()]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([id, g]) => ({ id, entry: g.entry, names: g.names, pools: g.pools }));
}

/** The pools (with a model) split into sets that share names, transitively; each set in the pools' order. */
function poolSets<P extends FleetPool>(pools: readonly P[]): P[][] {
  const listed = pools.filter((p) => p.models.length > 0);
  const parent = listed.map((_, i) => i);
  const root = (i: number): number => {
    while (parent[i] !== i) i = parent[i] = parent[parent[i] as number] as number;
    return i;
  };
  const byName = new Map<string, number>();
  listed.forEach((p, i) => {
    for (const n of poolNames(p)) {
      const j = byName.get(n);
      if (j === undefined) byName.set(n, i);
      else parent[root(i)] = root(j);
    }
  });
  const sets = new Map<number, P[]>();
  listed.forEach((p, i) => {
    const r = root(i);
    sets.set(r, [...(sets.get(r) ?? []), p]);
  });
  return [...sets.values()];
}

/**
 * Status, most telling first: `ready` when a pool serves it (node not offline, not draining);
 * `loading` when a pool prepares it or a replica holds its load claim; `unloading` when only
 * draining pools are left; `failed` when its last load failed or only failed, stopped or offline
 * pools list it; else `registered`.
 */
export function modelStatus(g: Pick<ModelGroup, 'entry' | 'pools'>): ClusterModel['status'] {
  const up = g.pools.filter((p) => p.node_state !== 'offline');
  if (up.some((p) => p.state === 'ready' && !p.draining)) return 'ready';
  if (up.some((p) => (p.state === 'provisioning' || p.state === 'starting') && !p.draining)) return 'loading';
  if (g.entry?.load !== undefined) return 'loading';
  if (up.some((p) => p.draining || p.state === 'draining')) return 'unloading';
  if (g.entry?.lastError !== undefined || g.pools.length > 0) return 'failed';
  return 'registered';
}

/** One model as the catalog routes answer it. */
export function clusterModel(g: ModelGroup): ClusterModel {
  const { entry } = g;
  const status = modelStatus(g);
  const aliases = new Set(entry?.aliases ?? []);
  for (const p of g.pools) for (const a of p.aliases ?? []) aliases.add(a);
  aliases.delete(g.id);
  const model: ClusterModel = {
    id: g.id,
    ref: entry?.ref ?? g.id,
    status,
    pools: g.pools.map(poolKey).sort(),
    aliases: [...aliases].sort(),
    registered: entry !== undefined,
    pinned: (entry?.policy.pin ?? 0) > 0 || g.pools.some(isStaticPool),
  };
  if (entry?.sha256 !== undefined) model.sha256 = entry.sha256;
  if (entry !== undefined) model.policy = entry.policy;
  const idle = idleSince(g.pools);
  if (idle !== undefined) model.idle_since = idle;
  const lastError = entry?.lastError ?? (status === 'failed' ? poolError(g.pools) : undefined);
  if (lastError !== undefined) model.last_error = lastError;
  return model;
}

/** The latest `idle_since` of the loaded copies when every one is idle; undefined while one is busy or none is loaded. */
function idleSince(pools: readonly FleetPool[]): string | undefined {
  const loaded = pools.filter((p) => p.node_state !== 'offline' && p.state === 'ready' && !p.draining);
  if (loaded.length === 0) return undefined;
  let latest: string | undefined;
  for (const p of loaded) {
    const since = p.snapshot.idle_since;
    if (since === undefined) return undefined;
    if (latest === undefined || Date.parse(since) > Date.parse(latest)) latest = since;
  }
  return latest;
}

/** Why a failed pool of the model failed, as its node reported it. */
function poolError(pools: readonly FleetPool[]): string | undefined {
  return pools.find((p) => p.state === 'failed' && p.snapshot.last_error !== undefined)?.snapshot.last_error;
}

/** The group a name (id, ref or alias) belongs to. */
export function groupOf<P extends FleetPool>(
  groups: readonly ModelGroup<P>[],
  name: string,
): ModelGroup<P> | undefined {
  return groups.find((g) => g.id === name || g.names.has(name));
}
