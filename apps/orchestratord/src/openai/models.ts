import type { OpenAiModel } from '@llama-orch/contracts';
import { servesModel, type PoolView } from '../registry/pool-view.js';

export const OWNED_BY = 'llama-orch';

/** Pools whose models a client can use now or soon: node not offline, ready or being provisioned/started. */
function listable(v: PoolView): boolean {
  return v.node_state !== 'offline' && (v.state === 'ready' || v.state === 'provisioning' || v.state === 'starting');
}

/** A pool's listed id for one of its models: its first alias for its first model, else the model ref. */
function listedId(v: PoolView, ref: string): string {
  const alias = v.aliases?.[0];
  return alias !== undefined && v.models[0] === ref ? alias : ref;
}

/**
 * `GET /v1/models`: one entry per model the ready and provisioning pools serve, by listed id
 * (first alias, else the model ref), `created` = when a pool first listed the model, sorted by id.
 */
export function listModels(views: readonly PoolView[], firstSeen: (ref: string) => number | undefined, now: number): OpenAiModel[] {
  const byId = new Map<string, OpenAiModel>();
  for (const v of views) {
    if (!listable(v)) continue;
    for (const ref of v.models) {
      const id = listedId(v, ref);
      const created = Math.floor((firstSeen(ref) ?? now) / 1000);
      const seen = byId.get(id);
      if (seen === undefined || created < seen.created) byId.set(id, { id, object: 'model', created, owned_by: OWNED_BY });
    }
  }
  return [...byId.values()].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
}

/**
 * `GET /v1/models/{id}`: the model a name (alias, catalog id or ref) stands for, under the name
 * asked for; undefined when no ready or provisioning pool serves it.
 */
export function findModel(views: readonly PoolView[], name: string, firstSeen: (ref: string) => number | undefined, now: number): OpenAiModel | undefined {
  let created: number | undefined;
  for (const v of views) {
    if (!listable(v) || !servesModel(v, name)) continue;
    const ref = v.models.includes(name) ? name : v.models[0];
    if (ref === undefined) continue;
    const c = Math.floor((firstSeen(ref) ?? now) / 1000);
    created = created === undefined ? c : Math.min(created, c);
  }
  return created === undefined ? undefined : { id: name, object: 'model', created, owned_by: OWNED_BY };
}
