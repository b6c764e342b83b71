import { describe, expect, it } from 'vitest';
import { snapshot } from '../testing/test-helpers.js';
import type { FleetNode, FleetPool } from './fleet.js';
import { knownNeed, loadCandidates, loadPoolId } from './load-placement.js';

const GiB = 1024 ** 3;
const node = (node_id: string, freeGiB: number | undefined, state: FleetNode['state'] = 'online'): FleetNode => ({
  node_id,
  address: `http://${node_id}:9200`,
  state,
  ...(freeGiB === undefined ? {} : { memory: { budget_bytes: 16 * GiB, used_bytes: (16 - freeGiB) * GiB } }),
});
const pool = (memoryGiB: number | undefined): FleetPool => {
  const snap = snapshot({ pool_id: 'p', ...(memoryGiB === undefined ? {} : { memory_bytes: memoryGiB * GiB }) });
  return { ...snap, node_id: 'x', node_state: 'online', free: snap.slots_free, snapshot: snap };
};

describe('load placement', () => {
  it('asks online nodes with on-demand memory, most room first (ties by id); an unknown need keeps every node with room', () => {
    const nodes = [
      node('b', 4),
      node('a', 4),
      node('c', 10),
      node('full', 0),
      node('yaml', undefined),
      node('gone', 12, 'offline'),
    ];
    const c = loadCandidates(nodes, []);
    expect(c.nodes.map((n) => n.node_id)).toEqual(['c', 'a', 'b']);
    expect([c.needBytes, c.onDemand]).toEqual([undefined, 4]);
  });

  it('a need some pool of the model reported (the largest) leaves out nodes without that much room', () => {
    expect(knownNeed([pool(undefined), pool(3), pool(5)])).toBe(5 * GiB);
    const c = loadCandidates([node('a', 4), node('b', 6), node('c', 5)], [pool(5)]);
    expect(c.nodes.map((n) => n.node_id)).toEqual(['b', 'c']);
    expect(loadCandidates([node('a', 4)], [pool(5)]).nodes).toEqual([]);
    // no pool lists it now (evicted): the need its last copy reported still rules, a listed one wins
    expect(loadCandidates([node('a', 4), node('b', 6)], [], 5 * GiB).nodes.map((n) => n.node_id)).toEqual(['b']);
    expect(loadCandidates([node('a', 4), node('b', 6)], [pool(3)], 5 * GiB).needBytes).toBe(3 * GiB);
  });

  it('pool ids: the ref’s last segment in the pool id alphabet, a random suffix, at most 64 characters', () => {
    const r = () => 'abc123';
    expect(loadPoolId('hf:Org/Repo/Qwen2.5-7B-Instruct.Q4_K_M.gguf', r)).toBe('qwen2-5-7b-instruct-q4_k_m-abc123');
    expect(loadPoolId('synthetic:llama', r)).toBe('llama-abc123');
    expect(loadPoolId('/models/__x__.GGUF', r)).toBe('x-abc123');
    expect(loadPoolId('!!!', r)).toBe('model-abc123');
    const long = loadPoolId(`hf:o/r/${'a'.repeat(200)}.gguf`, r);
    expect(long).toMatch(/^[a-z0-9][a-z0-9_-]{0,63}$/);
    expect(long.endsWith('-abc123')).toBe(true);
    expect(loadPoolId('m')).toMatch(/^m-[0-9a-f]{6}$/);
  });
});
