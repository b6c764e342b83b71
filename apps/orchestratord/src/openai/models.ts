import {
  DEFAULT_POOL_CAPABILITIES,
  PoolCapabilitySchema,
  type ModelServe,
  type OpenAiModel,
  type PoolCapability,
} from '@llama-orch/contracts';
import { servesModel, type PoolView } from '../registry/pool-view.js';
import type { CatalogModelEntry } from '../store/catalog-store.js';

export const OWNED_BY = 'llama-orch';

/** Pools whose models a client can use now or soon: node not offline, ready or being provisioned/started. */
function listable(v: PoolView): boolean {
  return v.node_state !== 'offline' && (v.state === 'ready' || v.state === 'provisioning' || v.state === 'starting');
}

/**
 * One model as several pools name it. A pool runs one model: its `models` are that model's names
 * (the configured ref, then the catalog id once resolved; an adopted engine lists only the catalog
 * id) and its `aliases` more of them. Pools sharing any name serve the same model.
 */
interface Listed {
  readonly names: Set<string>;
  alias: string | undefined;
  catalogId: string | undefined;
  ref: string;
  createdMs: number;
  capabilities: Set<PoolCapability>;
}

/** Capabilities in their schema's order (chat, completion, embeddings, rerank, infill). */
function ordered(set: ReadonlySet<PoolCapability>): PoolCapability[] {
  return PoolCapabilitySchema.options.filter((c) => set.has(c));
}

/** What a loaded copy of a catalog model will serve (its policy's `serve`), before any pool reports it. */
function servedBy(serve: ModelServe): readonly PoolCapability[] {
  if (serve === 'embeddings') return ['embeddings'];
  if (serve === 'reranking') return ['rerank'];
  return DEFAULT_POOL_CAPABILITIES;
}

/**
 * `GET /v1/models`: one entry per model the ready and provisioning pools serve and per catalog model
 * (loaded or not) — not one per name — listed by its first alias, else its catalog id, else its
 * ref; `created` = when a pool first listed it (a catalog model loaded nowhere: its registration);
 * `capabilities` = what any of its pools serves, else what its policy says a copy will; sorted by id.
 */
export function listModels(
  views: readonly PoolView[],
  firstSeen: (ref: string) => number | undefined,
  now: number,
  catalog: readonly CatalogModelEntry[] = [],
): OpenAiModel[] {
  const models: Listed[] = [];
  for (const v of views) {
    if (!listable(v) || v.models.length === 0) continue;
    const names = [...v.models, ...(v.aliases ?? [])];
    const found = models.filter((m) => names.some((n) => m.names.has(n)));
    // A pool naming two listed entries joins them: they were one model all along.
    const entry: Listed = found[0] ?? {
      names: new Set(),
      alias: undefined,
      catalogId: undefined,
      ref: v.models[0] as string,
      createdMs: Number.POSITIVE_INFINITY,
      capabilities: new Set(),
    };
    for (const other of found.slice(1)) {
      for (const n of other.names) entry.names.add(n);
      entry.alias ??= other.alias;
      entry.catalogId ??= other.catalogId;
      entry.createdMs = Math.min(entry.createdMs, other.createdMs);
      for (const c of other.capabilities) entry.capabilities.add(c);
      models.splice(models.indexOf(other), 1);
    }
    if (found.length === 0) models.push(entry);
    for (const n of names) entry.names.add(n);
    entry.alias ??= v.aliases?.[0];
    if (v.models.length > 1) entry.catalogId ??= v.models.at(-1);
    for (const m of v.models) entry.createdMs = Math.min(entry.createdMs, firstSeen(m) ?? now);
    for (const c of v.capabilities ?? DEFAULT_POOL_CAPABILITIES) entry.capabilities.add(c);
  }
  for (const e of catalog) {
    const names = [e.id, ...e.aliases];
    const served = models.find((m) => names.some((n) => m.names.has(n)));
    if (served !== undefined) {
      for (const n of names) served.names.add(n);
      served.alias ??= e.aliases[0];
      continue;
    }
    models.push({
      names: new Set(names),
      alias: e.aliases[0],
      catalogId: undefined,
      ref: e.id,
      createdMs: e.registeredAt,
      capabilities: new Set(servedBy(e.policy.serve)),
    });
  }
  return models
    .map((m): OpenAiModel => ({
      id: m.alias ?? m.catalogId ?? m.ref,
      object: 'model',
      created: Math.floor(m.createdMs / 1000),
      owned_by: OWNED_BY,
      capabilities: ordered(m.capabilities),
    }))
    .sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
}

/**
 * `GET /v1/models/{id}`: the model a name (alias, catalog id or ref) stands for, under the name
 * asked for; undefined when no ready or provisioning pool serves it and `entry` (the catalog's
 * entry for the name) is undefined.
 */
export function findModel(
  views: readonly PoolView[],
  name: string,
  firstSeen: (ref: string) => number | undefined,
  now: number,
  entry?: CatalogModelEntry,
): OpenAiModel | undefined {
  let created: number | undefined;
  const capabilities = new Set<PoolCapability>();
  for (const v of views) {
    if (!listable(v) || !servesModel(v, name)) continue;
    for (const c of v.capabilities ?? DEFAULT_POOL_CAPABILITIES) capabilities.add(c);
    for (const m of v.models) {
      const c = Math.floor((firstSeen(m) ?? now) / 1000);
      created = created === undefined ? c : Math.min(created, c);
    }
  }
  if (created === undefined && entry !== undefined) {
    created = Math.floor(entry.registeredAt / 1000);
    for (const c of servedBy(entry.policy.serve)) capabilities.add(c);
  }
  return created === undefined
    ? undefined
    : { id: name, object: 'model', created, owned_by: OWNED_BY, capabilities: ordered(capabilities) };
}
