import { describe, expect, it } from 'vitest';
import { PrefixIndex } from './prefix-index.js';

const blocks = (tag: string, n: number, shared: readonly string[] = []): string[] => [
  ...shared,
  ...Array.from({ length: n }, (_, i) => `${tag}${i}`),
];

describe('prefix index', () => {
  it("finds each pool's longest run of blocks from the first, in one walk", () => {
    const index = new PrefixIndex();
    const system = blocks('s', 4);
    index.hold('n1/p1', blocks('a', 3, system), 100);
    index.hold('n2/p2', system.slice(0, 2), 100);
    index.hold('n3/p3', blocks('b', 2), 100);
    const m = index.match(blocks('a', 5, system));
    expect(Object.fromEntries(m)).toEqual({ 'n1/p1': 7, 'n2/p2': 2 });
    expect(index.matchOf('n1/p1', blocks('z', 1, system))).toBe(4);
    expect(index.match(blocks('q', 3)).size).toBe(0);
    // a pool holding a later block but not the first matches nothing (the hashes are chained)
    index.hold('n4/p4', ['s1', 's2'], 100);
    expect(m.has('n4/p4')).toBe(false);
    expect(index.match(system).has('n4/p4')).toBe(false);
  });

  it("over capacity a pool drops the least recently used blocks, a prompt's end before the prefix it shares", () => {
    const index = new PrefixIndex();
    const system = blocks('s', 3);
    index.hold('p', blocks('a', 3, system), 8); // s0..s2 a0..a2
    index.hold('p', blocks('b', 3, system), 8); // + b0..b2: 9 entries, one over
    // a's last block went first (touched first), the shared prefix stayed
    expect(index.matchOf('p', blocks('a', 3, system))).toBe(5);
    expect(index.matchOf('p', blocks('b', 3, system))).toBe(6);
    expect(index.size).toEqual({ pools: 1, blocks: 8 });
    index.resize('p', 4);
    expect(index.matchOf('p', blocks('b', 3, system))).toBe(4);
    expect(index.occupancy('p')).toBe(1);
    expect(index.capacityOf('p')).toBe(4);
  });

  it('hold reports how many entries were touched after the deepest block the pool already held', () => {
    const index = new PrefixIndex();
    expect(index.hold('p', ['a0', 'a1'], 100)).toBe(0);
    index.hold('p', ['b0', 'b1', 'b2'], 100);
    // a1 is older than b0..b2 and a0 (a0 was touched after a1)
    expect(index.hold('p', ['a0', 'a1', 'a2'], 100)).toBe(4);
    // the same prompt again: nothing newer than its deepest block but its own prefix
    expect(index.hold('p', ['a0', 'a1', 'a2'], 100)).toBe(2);
  });

  it('forgets a pool, or every pool of a node, entirely', () => {
    const index = new PrefixIndex();
    index.hold('n1/a', ['x0', 'x1'], 10);
    index.hold('n1/b', ['x0'], 10);
    index.hold('n2/a', ['x0', 'x1'], 10);
    index.forgetWhere((p) => p.startsWith('n1/'));
    expect(Object.fromEntries(index.match(['x0', 'x1']))).toEqual({ 'n2/a': 2 });
    index.forget('n2/a');
    expect(index.match(['x0']).size).toBe(0);
    expect(index.size).toEqual({ pools: 0, blocks: 0 });
  });
});
