import { describe, expect, it } from 'vitest';
import type { PoolView } from '../registry/pool-view.js';
import { findModel, listModels } from './models.js';

const view = (over: Partial<PoolView> & { pool_id: string; models: string[] }): PoolView => ({
  node_id: 'n1',
  node_state: 'online',
  state: 'ready',
  ready: true,
  draining: false,
  slots_total: 1,
  free: 1,
  leased: 0,
  deterministic: false,
  ctx: 2048,
  address: 'http://x',
  dispatch: { url: 'http://x' },
  provisioningEtaMs: undefined,
  snapshot: {} as PoolView['snapshot'],
  ...over,
});

const seen = new Map([
  ['hf:a/b/m.gguf', 5_000_000],
  ['m-1234', 4_000_000],
  ['synthetic:llama', 9_000_000],
  ['other', 1_000],
]);
const firstSeen = (ref: string): number | undefined => seen.get(ref);

describe('GET /v1/models listing', () => {
  it('one entry per model, not per name: alias first, else the catalog id, else the ref; created = earliest first sighting', () => {
    const views = [
      // One model under three pools: provisioning (ref only), ready (ref + catalog id), adopted (catalog id only).
      view({ pool_id: 'a', models: ['hf:a/b/m.gguf'], state: 'provisioning', ready: false }),
      view({ pool_id: 'b', models: ['hf:a/b/m.gguf', 'm-1234'] }),
      view({ pool_id: 'c', models: ['m-1234'], node_id: 'n2' }),
      // An aliased model.
      view({ pool_id: 'd', models: ['synthetic:llama', 'synthetic-llama-9'], aliases: ['tiny', 'tiny-2'] }),
      // Not offered: failed, offline node.
      view({ pool_id: 'e', models: ['broken'], state: 'failed', ready: false }),
      view({ pool_id: 'f', models: ['other'], node_state: 'offline' }),
    ];
    expect(listModels(views, firstSeen, 10_000_000)).toEqual([
      { id: 'm-1234', object: 'model', created: 4000, owned_by: 'llama-orch', capabilities: ['chat', 'completion'] },
      { id: 'tiny', object: 'model', created: 9000, owned_by: 'llama-orch', capabilities: ['chat', 'completion'] },
    ]);
  });

  it('a pool that names two listed entries joins them', () => {
    const views = [
      view({ pool_id: 'a', models: ['r'] }),
      view({ pool_id: 'b', models: ['c-1'] }),
      view({ pool_id: 'z', models: ['r', 'c-1'] }),
    ];
    expect(listModels(views, () => undefined, 7_000).map((m) => m.id)).toEqual(['c-1']);
  });

  it('retrieve answers under the name asked, for any alias, catalog id or ref of an offered model', () => {
    const views = [view({ pool_id: 'b', models: ['hf:a/b/m.gguf', 'm-1234'], aliases: ['nice'] })];
    for (const name of ['nice', 'm-1234', 'hf:a/b/m.gguf'])
      expect(findModel(views, name, firstSeen, 0)).toEqual({
        id: name,
        object: 'model',
        created: 4000,
        owned_by: 'llama-orch',
        capabilities: ['chat', 'completion'],
      });
    expect(findModel(views, 'nope', firstSeen, 0)).toBeUndefined();
    expect(findModel([view({ pool_id: 'e', models: ['x'], state: 'failed' })], 'x', firstSeen, 0)).toBeUndefined();
  });

  it('capabilities: what any pool of the model serves, in a fixed order; a pool that reports none serves chat and completion', () => {
    const views = [
      view({ pool_id: 'a', models: ['e'], aliases: ['embedder'], capabilities: ['rerank'] }),
      view({ pool_id: 'b', models: ['e'], capabilities: ['embeddings'], node_id: 'n2' }),
      view({ pool_id: 'c', models: ['g'], capabilities: ['infill', 'completion', 'chat'] }),
      view({ pool_id: 'd', models: ['old'] }),
    ];
    expect(listModels(views, () => undefined, 0).map((m) => [m.id, m.capabilities])).toEqual([
      ['embedder', ['embeddings', 'rerank']],
      ['g', ['chat', 'completion', 'infill']],
      ['old', ['chat', 'completion']],
    ]);
    expect(findModel(views, 'e', () => undefined, 0)?.capabilities).toEqual(['embeddings', 'rerank']);
  });
});
