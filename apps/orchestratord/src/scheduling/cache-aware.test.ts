import { describe, expect, it } from 'vitest';
import type { PromptBlocks } from '../prefix/prompt-blocks.js';
import type { PoolCandidate } from '../registry/pool-view.js';
import { place, type PlacementRequest, type PrefixScorer, type RoundRobinCursor } from './placement.js';

function pool(over: Partial<PoolCandidate> & { pool_id: string }): PoolCandidate {
  return {
    node_id: 'n1',
    node_state: 'online',
    state: 'ready',
    ready: true,
    draining: false,
    slots_total: 4,
    free: 4,
    leased: 0,
    models: ['m'],
    deterministic: false,
    ctx: 4096,
    ...over,
  };
}
const BLOCKS: PromptBlocks = { hashes: ['h0', 'h1', 'h2', 'h3'], chars: 1100 };
const req = (over: Partial<PlacementRequest> = {}): PlacementRequest => ({
  model_ref: 'm',
  ctx: 0,
  blocks: BLOCKS,
  ...over,
});
const rr = (): RoundRobinCursor => ({ next: 0 });

/** A scorer over fixed matches (`node/pool` → blocks) and occupancies. */
function scorer(matches: Record<string, number>, occupancy: Record<string, number> = {}): PrefixScorer {
  return {
    matches: (blocks) =>
      blocks === undefined || Object.keys(matches).length === 0 ? undefined : new Map(Object.entries(matches)),
    occupancy: (key) => occupancy[key] ?? 0,
  };
}
const decide = (r: PlacementRequest, pools: PoolCandidate[], s: PrefixScorer) => {
  const d = place(r, pools, 'cache-aware', rr(), s);
  return d.kind === 'assign' ? `${d.candidate.pool_id}:${d.reason}` : d.kind;
};

describe('cache-aware placement', () => {
  it('takes the pool holding the longest prefix over a less loaded one', () => {
    const pools = [pool({ pool_id: 'a' }), pool({ pool_id: 'b', free: 3 }), pool({ pool_id: 'c', free: 3 })];
    expect(decide(req(), pools, scorer({ 'n1/b': 2, 'n1/c': 3 }))).toBe('c:prefix');
    // equal matches: the less loaded of them
    expect(decide(req(), pools, scorer({ 'n1/b': 3, 'n1/c': 3 }))).toBe('b:prefix');
    // the same pools under least-loaded
    expect(place(req(), pools, 'least-loaded', rr(), scorer({ 'n1/c': 3 }))).toMatchObject({
      kind: 'assign',
      candidate: { pool_id: 'a' },
      reason: 'strategy',
    });
  });

  it('the load guard passes over a prefix holder with 2+ more busy slots and 1.5× the least-loaded pool’s', () => {
    const least = pool({ pool_id: 'a', free: 3 }); // 1 busy
    expect(decide(req(), [least, pool({ pool_id: 'h', free: 2 })], scorer({ 'n1/h': 4 }))).toBe('h:prefix'); // 2 vs 1
    expect(decide(req(), [least, pool({ pool_id: 'h', free: 1 })], scorer({ 'n1/h': 4 }))).toBe('a:load-guard'); // 3 vs 1
    const twoBusy = pool({ pool_id: 'a', free: 2, slots_total: 4 });
    // 4 vs 2 busy: twice as many, 2 more → guarded; 3 vs 2 → not (1.5× but only 1 more)
    expect(decide(req(), [twoBusy, pool({ pool_id: 'h', free: 2, slots_total: 6 })], scorer({ 'n1/h': 1 }))).toBe(
      'a:load-guard',
    );
    expect(decide(req(), [twoBusy, pool({ pool_id: 'h', free: 2, slots_total: 5 })], scorer({ 'n1/h': 1 }))).toBe(
      'h:prefix',
    );
  });

  it('never waits for a busy prefix holder while another pool has a free slot', () => {
    const pools = [pool({ pool_id: 'a', slots_total: 1, free: 1 }), pool({ pool_id: 'h', slots_total: 1, free: 0 })];
    expect(decide(req(), pools, scorer({ 'n1/h': 4 }))).toBe('a:strategy');
  });

  it('with no prefix held anywhere: least-loaded, equally loaded pools by the cache room the index sees', () => {
    const pools = [pool({ pool_id: 'a' }), pool({ pool_id: 'b' }), pool({ pool_id: 'c', free: 3 })];
    expect(decide(req(), pools, scorer({}, { 'n1/a': 0.5, 'n1/b': 0.1 }))).toBe('b:strategy');
    expect(decide(req(), pools, scorer({}))).toBe('a:strategy');
    // a task without a prompt (an engine call) is placed the same way
    expect(decide(req({ blocks: undefined }), pools, scorer({ 'n1/c': 4 }, { 'n1/a': 1 }))).toBe('b:strategy');
  });

  it('session affinity, pins and preferred pools come before the prefix', () => {
    const pools = [pool({ pool_id: 'a' }), pool({ pool_id: 'b' }), pool({ pool_id: 'h' })];
    const s = scorer({ 'n1/h': 4 });
    expect(decide(req({ affinity: { node_id: 'n1', pool_id: 'b' } }), pools, s)).toBe('b:affinity');
    expect(decide(req({ placement: { mode: 'pin', pin_pool_id: 'a', allow_fallback: true } }), pools, s)).toBe(
      'a:pinned',
    );
    expect(decide(req({ placement: { mode: 'prefer', prefer_pools: ['b'], allow_fallback: true } }), pools, s)).toBe(
      'b:preferred',
    );
    // among the pools the preference leaves equal, the prefix decides
    expect(decide(req({ placement: { mode: 'prefer', prefer_pools: ['x'], allow_fallback: true } }), pools, s)).toBe(
      'h:fallback',
    );
    // avoided pools are not candidates
    expect(decide(req({ placement: { mode: 'auto', avoid_pools: ['h'], allow_fallback: true } }), pools, s)).toBe(
      'a:strategy',
    );
  });

  it('without a scorer cache-aware places as least-loaded', () => {
    const pools = [pool({ pool_id: 'a', free: 2 }), pool({ pool_id: 'b' })];
    expect(place(req(), pools, 'cache-aware', rr())).toMatchObject({ candidate: { pool_id: 'b' }, reason: 'strategy' });
  });
});
