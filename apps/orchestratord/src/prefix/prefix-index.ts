/**
 * Which prompt blocks each pool's engine is believed to hold in its prompt cache: an approximate
 * index learnt from placements (llama.cpp publishes no KV-cache events; .specs/68-prefix-routing.md).
 * Per pool a least-recently-used set of chained block hashes, bounded by the pool's capacity in
 * blocks; across pools a map from hash to the pools holding it, so one walk over a prompt's blocks
 * finds every pool's match.
 *
 * A prompt's blocks are touched last block first, so its first blocks are the most recent: when a
 * pool's set overflows, the ends of long prompts go before the prefixes they share with others, as
 * leaves go before the trunk in a radix tree.
 */
export class PrefixIndex {
  /** Hash → pools (`node_id/pool_id`) holding it. */
  readonly #holders = new Map<string, Set<string>>();
  readonly #pools = new Map<string, PoolBlocks>();

  /**
   * Blocks each pool holds from the first on, for `hashes` (pools with none are absent).
   *
   * The holders of a prompt's blocks are nested: a block's hash appears only in prompts that carry
   * every block before it, and a hold touches the earlier blocks after the later ones, so a pool
   * never keeps block i longer than block i − 1 — the holders of block i are a subset of those of
   * block i − 1. So the deepest block held anywhere ends the walk, and walking back from it only
   * the blocks whose holders outnumber the next one's bring new pools: the cost is the pools in the
   * answer plus one lookup per block, not pools × blocks.
   */
  match(hashes: readonly string[]): Map<string, number> {
    const matched = new Map<string, number>();
    let held = 0;
    while (held < hashes.length && this.#holders.has(hashes[held] as string)) held += 1;
    let deeper = 0;
    for (let i = held - 1; i >= 0; i--) {
      const holders = this.#holders.get(hashes[i] as string) as Set<string>;
      // Nested and as many: the same pools as the block after it.
      if (holders.size === deeper) continue;
      for (const pool of holders) if (!matched.has(pool)) matched.set(pool, i + 1);
      deeper = holders.size;
    }
    return matched;
  }

  /** Blocks of `hashes` the pool holds from the first on. */
  matchOf(pool: string, hashes: readonly string[]): number {
    let i = 0;
    while (i < hashes.length && this.#holders.get(hashes[i] as string)?.has(pool) === true) i += 1;
    return i;
  }

  /**
   * The pool holds `hashes` now (it was given the prompt, or a peer replica says so). Returns when
   * the deepest of them it already held was last touched (undefined when it held none) and the
   * pool's touch count before this call: {@link touchedBetween} later tells how many entries a hit
   * on it relied on surviving.
   */
  hold(pool: string, hashes: readonly string[], capacity: number): { touched: number | undefined; clock: number } {
    const blocks = this.#poolBlocks(pool, capacity);
    const clock = blocks.clock;
    let touched: number | undefined;
    for (let i = hashes.length - 1; i >= 0; i--) {
      const h = hashes[i] as string;
      const last = blocks.lru.get(h);
      if (last !== undefined) {
        touched ??= last;
        blocks.lru.delete(h);
      } else {
        let holders = this.#holders.get(h);
        if (holders === undefined) this.#holders.set(h, (holders = new Set()));
        holders.add(pool);
      }
      blocks.lru.set(h, ++blocks.clock);
    }
    this.#trim(pool, blocks);
    return { touched, clock };
  }

  /**
   * Entries of the pool last touched after touch `after` and no later than `until` (one pass over
   * its entries: for an answer that contradicts a prediction, not per placement).
   */
  touchedBetween(pool: string, after: number, until: number): number {
    let n = 0;
    for (const t of this.#pools.get(pool)?.lru.values() ?? []) if (t > after && t <= until) n += 1;
    return n;
  }

  /** The pool's capacity in blocks (its entries beyond it go, oldest first). */
  resize(pool: string, capacity: number): void {
    const blocks = this.#pools.get(pool);
    if (blocks === undefined) return;
    blocks.capacity = Math.max(1, Math.floor(capacity));
    this.#trim(pool, blocks);
  }

  capacityOf(pool: string): number | undefined {
    return this.#pools.get(pool)?.capacity;
  }

  /** Share of the pool's capacity its entries fill, 0..1 (0 for a pool never seen). */
  occupancy(pool: string): number {
    const blocks = this.#pools.get(pool);
    return blocks === undefined ? 0 : blocks.lru.size / blocks.capacity;
  }

  /** The pool's engine is gone or restarted: it holds nothing. */
  forget(pool: string): void {
    const blocks = this.#pools.get(pool);
    if (blocks === undefined) return;
    for (const h of blocks.lru.keys()) this.#release(h, pool);
    this.#pools.delete(pool);
  }

  /** Pools with entries, and entries in all. */
  get size(): { pools: number; blocks: number } {
    let n = 0;
    for (const b of this.#pools.values()) n += b.lru.size;
    return { pools: this.#pools.size, blocks: n };
  }

  #poolBlocks(pool: string, capacity: number): PoolBlocks {
    let blocks = this.#pools.get(pool);
    if (blocks === undefined) {
      blocks = { lru: new Map(), clock: 0, capacity: Math.max(1, Math.floor(capacity)) };
      this.#pools.set(pool, blocks);
    }
    return blocks;
  }

  #trim(pool: string, blocks: PoolBlocks): void {
    while (blocks.lru.size > blocks.capacity) {
      const oldest = blocks.lru.keys().next().value as string;
      blocks.lru.delete(oldest);
      this.#release(oldest, pool);
    }
  }

  #release(h: string, pool: string): void {
    const holders = this.#holders.get(h);
    if (holders === undefined) return;
    holders.delete(pool);
    if (holders.size === 0) this.#holders.delete(h);
  }
}

interface PoolBlocks {
  /** Hash → the pool's touch count when it was last touched; iteration order is least recent first. */
  readonly lru: Map<string, number>;
  clock: number;
  capacity: number;
}
