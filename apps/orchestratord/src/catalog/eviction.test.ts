import { CatalogRegisterRequestSchema, type PoolSnapshot } from '@llama-orch/contracts';
import { describe, expect, it } from 'vitest';
import type { CatalogModelEntry } from '../store/catalog-store.js';
import { snapshot } from '../testing/test-helpers.js';
import { evictionVictim, swapVictim } from './eviction.js';
import type { FleetNode, FleetPool } from './fleet.js';

const entry = (ref: string, over: { pin?: number; priority?: number } = {}): CatalogModelEntry => {
  const r = CatalogRegisterRequestSchema.parse({ ref, ...over });
  return { id: ref, ref, aliases: r.aliases, policy: r, registeredAt: 0 };
};
const node: FleetNode = {
  node_id: 'n1',
  address: 'http://n1',
  state: 'online',
  memory: { budget_bytes: 1, used_bytes: 1 },
};
const pool = (id: string, ref: string, over: Partial<PoolSnapshot> = {}): FleetPool => {
  const s = snapshot({ pool_id: id, origin: 'catalog', models: [ref], state: 'ready', ready: true, ...over });
  return {
    node_id: 'n1',
    pool_id: id,
    node_state: 'online',
    state: s.state,
    slots_total: s.slots_total,
    free: s.slots_free,
    draining: false,
    models: s.models,
    snapshot: s,
  };
};
const idle = (ms: number): Partial<PoolSnapshot> => ({ idle_since: new Date(Date.now() - ms).toISOString() });

describe('eviction: which copy goes so a model fits', () => {
  const loading = entry('new', { priority: 5 });

  it('an idle copy: lowest priority first, then the longest idle; never busy, pinned, higher priority, loading or static', () => {
    const entries = [
      loading,
      entry('a'),
      entry('b'),
      entry('hi', { priority: 9 }),
      entry('pin', { pin: 1 }),
      entry('busy'),
      entry('prep'),
      entry('yaml'),
    ];
    const pools = [
      pool('a', 'a', idle(1000)),
      pool('b', 'b', idle(5000)),
      pool('hi', 'hi', idle(90_000)),
      pool('pin', 'pin', idle(90_000)),
      pool('busy', 'busy', { slots_free: 0 }),
      pool('prep', 'prep', { state: 'starting', ready: false, ...idle(90_000) }),
      pool('yaml', 'yaml', { origin: undefined, ...idle(90_000) }),
    ];
    expect(evictionVictim(loading, entries, pools, [node])?.pool_id).toBe('b');
    // idle by the node's last report, but a task was placed on it here since: not idle
    const justPlaced = pools.map((p) => (p.pool_id === 'b' ? { ...p, free: 0 } : p));
    expect(evictionVictim(loading, entries, justPlaced, [node])?.pool_id).toBe('a');
    expect(
      evictionVictim(
        loading,
        entries,
        pools.filter((p) => p.pool_id !== 'b' && p.pool_id !== 'a'),
        [node],
      ),
    ).toBeUndefined();
    // a lower priority goes before a longer idle
    const low = [...entries, entry('low', { priority: -1 })];
    expect(evictionVictim(loading, low, [...pools, pool('low', 'low', idle(10))], [node])?.pool_id).toBe('low');
  });

  it('a busy copy to swap: lowest priority, then the most free slots; never pinned, higher priority, loading or static', () => {
    const entries = [
      loading,
      entry('x'),
      entry('y'),
      entry('hi', { priority: 9 }),
      entry('pin', { pin: 1 }),
      entry('prep'),
      entry('yaml'),
    ];
    const pools = [
      pool('x', 'x', { slots_total: 2, slots_free: 0 }),
      pool('y', 'y', { slots_total: 2, slots_free: 1 }),
      pool('hi', 'hi', { slots_total: 2, slots_free: 2 }),
      pool('pin', 'pin', { slots_total: 2, slots_free: 2 }),
      pool('prep', 'prep', { state: 'provisioning', ready: false }),
      pool('yaml', 'yaml', { origin: undefined, slots_total: 2, slots_free: 2 }),
    ];
    expect(swapVictim(loading, entries, pools, [node])?.pool.pool_id).toBe('y');
    expect(
      swapVictim(
        loading,
        entries,
        pools.filter((p) => p.pool_id === 'hi' || p.pool_id === 'pin' || p.pool_id === 'prep' || p.pool_id === 'yaml'),
        [node],
      ),
    ).toBeUndefined();
    // a node that loads nothing on request is not swapped on
    expect(swapVictim(loading, entries, pools, [{ ...node, memory: undefined }])).toBeUndefined();
  });
});
