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
  });

  it('keeps the holders of each block nested in those of the block before, whatever the trims (what match relies on)', () => {
    const index = new PrefixIndex();
    let seed = 7;
    const random = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return seed % n;
    };
    // 6 shared prefixes of 5 blocks, prompts adding 1–3 blocks of their own, over 4 pools of 12–40 blocks
    const prompts = Array.from({ length: 60 }, (_, i) => blocks(`q${i}-`, 1 + (i % 3), blocks(`s${i % 6}-`, 5)));
    for (let step = 0; step < 2000; step++) {
      const pool = `n${random(4)}/p`;
      index.hold(pool, prompts[random(prompts.length)]!, 12 + 7 * Number(pool[1]));
      if (step % 97 === 0) index.resize(pool, 10 + random(30));
    }
    for (const prompt of prompts) {
      const m = index.match(prompt);
      // what match reports is what a block-by-block walk finds
      for (const pool of ['n0/p', 'n1/p', 'n2/p', 'n3/p']) expect(m.get(pool) ?? 0).toBe(index.matchOf(pool, prompt));
    }
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

  it('hold reports when the deepest block already held was touched; touchedBetween counts the entries touched since', () => {
    const index = new PrefixIndex();
    expect(index.hold('p', ['a0', 'a1'], 100)).toEqual({ touched: undefined, clock: 0 }); // a1 1, a0 2
    index.hold('p', ['b0', 'b1', 'b2'], 100); // b2 3, b1 4, b0 5
    const again = index.hold('p', ['a0', 'a1', 'a2'], 100); // a2 6, a1 7, a0 8
    expect(again).toEqual({ touched: 1, clock: 5 });
    // touched after a1 and before the placement: a0, b0..b2 (a0 was touched again since: not counted)
    expect(index.touchedBetween('p', again.touched!, again.clock)).toBe(3);
    expect(index.touchedBetween('other', 0, 10)).toBe(0);
  });

  it('forgets a pool entirely', () => {
    const index = new PrefixIndex();
    index.hold('n1/a', ['x0', 'x1'], 10);
    index.hold('n1/b', ['x0'], 10);
    index.hold('n2/a', ['x0', 'x1'], 10);
    index.forget('n1/a');
    index.forget('n1/b');
    expect(Object.fromEntries(index.match(['x0', 'x1']))).toEqual({ 'n2/a': 2 });
    index.forget('n2/a');
    expect(index.match(['x0']).size).toBe(0);
    expect(index.size).toEqual({ pools: 0, blocks: 0 });
  });
});
