// Session affinity in placement: a conversation's next turn goes to the pool that holds its prompt
// cache while that pool has a free slot, and to normal placement otherwise (never waits for it).
import { describe, expect, it } from 'vitest';
import type { PoolCandidate } from '../registry/pool-view.js';
import { place, type PlacementRequest, type RoundRobinCursor } from './placement.js';

function pool(over: Partial<PoolCandidate> & { pool_id: string }): PoolCandidate {
  return {
    node_id: 'n1',
    node_state: 'online',
    state: 'ready',
    ready: true,
    draining: false,
    slots_total: 2,
    free: 2,
    leased: 0,
    models: ['m'],
    deterministic: false,
    ctx: 4096,
    ...over,
  };
}
const req = (over: Partial<PlacementRequest> = {}): PlacementRequest => ({ model_ref: 'm', ctx: 0, ...over });
const rr = (): RoundRobinCursor => ({ next: 0 });
const decide = (
  r: PlacementRequest,
  pools: PoolCandidate[],
  strategy: 'least-loaded' | 'round-robin' = 'least-loaded',
): string => {
  const d = place(r, pools, strategy, rr());
  return d.kind === 'assign' ? `${d.candidate.node_id}/${d.candidate.pool_id} ${d.reason}` : d.kind;
};

describe('place with session affinity', () => {
  const pools = [
    pool({ pool_id: 'a', free: 2 }),
    pool({ pool_id: 'b', free: 1 }),
    pool({ pool_id: 'b', node_id: 'n2', free: 2 }),
  ];

  it("prefers the session's pool while it has a free slot, over least-loaded and round-robin", () => {
    expect(decide(req(), pools)).toBe('n1/a strategy');
    expect(decide(req({ affinity: { node_id: 'n1', pool_id: 'b' } }), pools)).toBe('n1/b affinity');
    expect(decide(req({ affinity: { node_id: 'n1', pool_id: 'b' } }), pools, 'round-robin')).toBe('n1/b affinity');
    // Node and pool both match: the same pool id on another node is another pool.
    expect(decide(req({ affinity: { node_id: 'n2', pool_id: 'b' } }), pools)).toBe('n2/b affinity');
  });

  it("falls back to normal placement when the session's pool is full, gone, unready or does not serve the model", () => {
    const full = [pool({ pool_id: 'a', free: 1 }), pool({ pool_id: 'b', free: 0 })];
    expect(decide(req({ affinity: { node_id: 'n1', pool_id: 'b' } }), full)).toBe('n1/a strategy');
    expect(decide(req({ affinity: { node_id: 'n9', pool_id: 'zz' } }), pools)).toBe('n1/a strategy');
    const draining = [pool({ pool_id: 'a', free: 1 }), pool({ pool_id: 'b', draining: true })];
    expect(decide(req({ affinity: { node_id: 'n1', pool_id: 'b' } }), draining)).toBe('n1/a strategy');
    const otherModel = [pool({ pool_id: 'a', free: 1 }), pool({ pool_id: 'b', models: ['x'] })];
    expect(decide(req({ affinity: { node_id: 'n1', pool_id: 'b' } }), otherModel)).toBe('n1/a strategy');
    // Only the session's pool exists and it is busy: the task waits like any other.
    expect(decide(req({ affinity: { node_id: 'n1', pool_id: 'b' } }), [pool({ pool_id: 'b', free: 0 })])).toBe('wait');
  });

  it("never overrides the task's own constraints: avoid_pools, a better-ranked preferred pool, strict determinism, exclusions", () => {
    const aff = { node_id: 'n1', pool_id: 'b' };
    expect(
      decide(req({ affinity: aff, placement: { mode: 'auto', avoid_pools: ['b'], allow_fallback: true } }), pools),
    ).toBe('n1/a strategy');
    expect(
      decide(req({ affinity: aff, placement: { mode: 'prefer', prefer_pools: ['a'], allow_fallback: true } }), pools),
    ).toBe('n1/a preferred');
    // Preferred pools all busy: among the fallbacks the session's pool wins.
    const busyA = [pool({ pool_id: 'a', free: 0 }), ...pools.slice(1)];
    expect(
      decide(req({ affinity: aff, placement: { mode: 'prefer', prefer_pools: ['a'], allow_fallback: true } }), busyA),
    ).toBe('n1/b affinity');
    expect(
      decide(req({ affinity: aff, determinism: 'strict' }), [...pools, pool({ pool_id: 'd', deterministic: true })]),
    ).toBe('n1/d strategy');
    expect(decide(req({ affinity: aff, exclude: new Set(['n1/b']) }), pools)).toBe('n1/a strategy');
  });

  it('works with aliases: a pool serves a task that names its model by alias', () => {
    const aliased = [
      pool({ pool_id: 'a', models: ['ref'], aliases: ['nice-name'] }),
      pool({ pool_id: 'b', models: ['ref'], free: 1 }),
    ];
    expect(decide(req({ model_ref: 'nice-name' }), aliased)).toBe('n1/a strategy');
    expect(decide(req({ model_ref: 'ref', affinity: { node_id: 'n1', pool_id: 'b' } }), aliased)).toBe('n1/b affinity');
  });
});
