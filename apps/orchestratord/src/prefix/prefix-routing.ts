import type { NodeRegistry } from '../registry/node-registry.js';
import { candidateKey } from '../registry/pool-view.js';
import type { OrchdMetrics } from '../support/metrics.js';
import type { PrefixNews, PrefixShare } from '../store/prefix-share.js';
import { PrefixIndex } from './prefix-index.js';
import { BLOCK_CHARS, type PromptBlocks } from './prompt-blocks.js';

/** A pool as the index sizes it. */
export interface PrefixPool {
  /** `node_id/pool_id`, when the view carries it. */
  readonly key?: string | undefined;
  readonly node_id: string;
  readonly pool_id: string;
  /** Tokens one slot holds. */
  readonly ctx: number;
  readonly slots_total: number;
}

/** What a placed task keeps of the index's prediction, for its answer to check. */
export interface PrefixPrediction {
  /** `node_id/pool_id`. */
  readonly pool: string;
  /** Blocks of the prompt the pool was expected to hold. */
  readonly blocks: number;
  /** The pool's touch count when the deepest of them was last touched, and when the task was placed (prefix-index.ts `hold`). */
  readonly touched: number | undefined;
  readonly clock: number;
}

export interface PrefixRoutingOptions {
  share: PrefixShare;
  /** This replica's id: its own news is already in its index. */
  replicaId: string;
  metrics: Pick<OrchdMetrics, 'prefixPredictedTokens' | 'prefixCachedTokens' | 'prefixPredictions'>;
  /**
   * The pools: the size of one first heard of from a peer, and the events that empty caches (a node
   * gone, a pool no longer listed as ready).
   */
  registry: Pick<NodeRegistry, 'pool' | 'subscribe'>;
}

/** Characters per token assumed before any answer says otherwise (English text with llama-family tokenizers). */
const CHARS_PER_TOKEN = 4;
/** A pool's capacity never shrinks below this many blocks, nor grows past this many times its first estimate. */
const MIN_CAPACITY_BLOCKS = 4;
const MAX_GROWTH = 16;

/**
 * The approximate prefix-cache scorer (.specs/68-prefix-routing.md): which pool's engine holds the
 * longest prefix of a prompt, learnt from placements (this replica's and, through the store, every
 * other's) and corrected by each answer's cached tokens. A pool's capacity starts at what its slots
 * hold plus as much again for llama-server's host-RAM prompt cache (which keeps at least the
 * context's worth when on), in blocks; a predicted hit that missed shrinks it to the entries the hit
 * relied on surviving, and a hit on an old entry or cache the index did not expect grows it by a
 * quarter.
 */
export class PrefixRouting {
  readonly #index = new PrefixIndex();
  readonly #share: PrefixShare;
  readonly #replicaId: string;
  readonly #metrics: PrefixRoutingOptions['metrics'];
  readonly #registry: PrefixRoutingOptions['registry'];
  /** The index's pools of each node, so a node's heartbeat checks only its own. */
  readonly #nodePools = new Map<string, Set<string>>();
  readonly #unsubscribe: Array<() => void>;

  constructor(o: PrefixRoutingOptions) {
    this.#share = o.share;
    this.#replicaId = o.replicaId;
    this.#metrics = o.metrics;
    this.#registry = o.registry;
    const registry = o.registry;
    this.#unsubscribe = [
      o.share.subscribe((news) => this.#heard(news)),
      registry.subscribe((e) => {
        if (e.type === 'offline' || e.type === 'deregistered') this.forgetNode(e.nodeId);
        else if (e.type === 'heartbeat' || e.type === 'online')
          this.refreshNode(e.nodeId, (key) => registry.pool(key)?.state === 'ready');
      }),
    ];
  }

  /** Blocks of the prompt each pool holds (`node_id/pool_id` → blocks); undefined when none holds any. */
  matches(blocks: PromptBlocks | undefined): ReadonlyMap<string, number> | undefined {
    if (blocks === undefined || blocks.hashes.length === 0) return undefined;
    const matched = this.#index.match(blocks.hashes);
    return matched.size === 0 ? undefined : matched;
  }

  /** Share of the pool's capacity the index fills, 0..1. */
  occupancy(poolKey: string): number {
    return this.#index.occupancy(poolKey);
  }

  /** The task's prompt goes to `pool`: from now on the pool holds it. Returns the prediction to check against the answer. */
  placed(blocks: PromptBlocks | undefined, pool: PrefixPool): PrefixPrediction | undefined {
    if (blocks === undefined || blocks.hashes.length === 0) return undefined;
    const key = candidateKey(pool);
    this.#known(pool.node_id, key);
    const predicted = this.#index.matchOf(key, blocks.hashes);
    const { touched, clock } = this.#index.hold(key, blocks.hashes, firstCapacity(pool));
    this.#share.publish({ kind: 'held', from: this.#replicaId, pool: key, hashes: blocks.hashes });
    return { pool: key, blocks: predicted, touched: predicted > 0 ? touched : undefined, clock };
  }

  /** The pool answered the task: `cachedTokens` of its `promptTokens` came from the engine's cache. */
  answered(
    blocks: PromptBlocks | undefined,
    prediction: PrefixPrediction | undefined,
    poolId: string,
    promptTokens: number | undefined,
    cachedTokens: number | undefined,
  ): void {
    if (blocks === undefined || prediction === undefined || promptTokens === undefined || promptTokens === 0) return;
    if (cachedTokens === undefined) return;
    const charsPerToken = blocks.chars / promptTokens;
    const cachedBlocks = Math.floor((cachedTokens * charsPerToken) / BLOCK_CHARS);
    const expected = prediction.blocks;
    this.#metrics.prefixPredictedTokens.inc(
      { pool_id: poolId },
      Math.min(promptTokens, Math.round((expected * BLOCK_CHARS) / charsPerToken)),
    );
    this.#metrics.prefixCachedTokens.inc({ pool_id: poolId }, cachedTokens);
    // One block of slack: the template's markup shifts where token boundaries fall in the text.
    const outcome =
      expected === 0 ? (cachedBlocks > 1 ? 'unforeseen' : 'none') : cachedBlocks >= expected - 1 ? 'hit' : 'miss';
    this.#metrics.prefixPredictions.inc({ pool_id: poolId, outcome });
    const capacity = this.#index.capacityOf(prediction.pool);
    if (capacity === undefined) return;
    const floor = Math.max(MIN_CAPACITY_BLOCKS, blocks.hashes.length);
    let next = capacity;
    if (outcome === 'miss') next = Math.max(floor, Math.min(capacity, this.#rank(prediction)));
    else if (outcome === 'unforeseen' || (outcome === 'hit' && this.#old(prediction, capacity))) {
      const size = this.#registry.pool(prediction.pool);
      const ceiling = size === undefined ? capacity : firstCapacity(size) * MAX_GROWTH;
      next = Math.min(ceiling, Math.ceil(capacity * 1.25));
    }
    if (next === capacity) return;
    this.#index.resize(prediction.pool, next);
    this.#share.publish({ kind: 'capacity', from: this.#replicaId, pool: prediction.pool, blocks: next });
  }

  /** The node is gone (offline, deregistered): its engines' caches with it. */
  forgetNode(nodeId: string): void {
    for (const key of this.#nodePools.get(nodeId) ?? []) this.#index.forget(key);
    this.#nodePools.delete(nodeId);
  }

  /**
   * The node reported its pools: a pool of the index that it no longer lists as serving (unloaded,
   * draining, reloading, restarting: its next engine starts with an empty cache) is forgotten.
   */
  refreshNode(nodeId: string, serving: (poolKey: string) => boolean): void {
    const keys = this.#nodePools.get(nodeId);
    if (keys === undefined) return;
    for (const key of keys) {
      if (serving(key)) continue;
      this.#index.forget(key);
      keys.delete(key);
    }
    if (keys.size === 0) this.#nodePools.delete(nodeId);
  }

  /** The pool's capacity in blocks as the index keeps it (undefined before its first prompt). */
  capacityOf(poolKey: string): number | undefined {
    return this.#index.capacityOf(poolKey);
  }

  /** Pools and blocks the index holds. */
  get size(): { pools: number; blocks: number } {
    return this.#index.size;
  }

  close(): void {
    for (const unsubscribe of this.#unsubscribe.splice(0)) unsubscribe();
  }

  /** Entries touched between the deepest predicted block's last touch and the placement: what the hit relied on surviving. */
  #rank(p: PrefixPrediction): number {
    return p.touched === undefined ? 0 : this.#index.touchedBetween(p.pool, p.touched, p.clock);
  }

  /** Whether a hit relied on an entry older than ¾ of the capacity (touches bound the count from above: scan only past that bound). */
  #old(p: PrefixPrediction, capacity: number): boolean {
    if (p.touched === undefined || p.clock - p.touched <= 0.75 * capacity) return false;
    return this.#rank(p) > 0.75 * capacity;
  }

  #heard(news: PrefixNews): void {
    if (news.from === this.#replicaId) return;
    if (news.kind === 'capacity') {
      this.#index.resize(news.pool, news.blocks);
      return;
    }
    const size = this.#registry.pool(news.pool);
    this.#known(news.pool.slice(0, news.pool.indexOf('/')), news.pool);
    this.#index.hold(news.pool, news.hashes, size === undefined ? MIN_CAPACITY_BLOCKS : firstCapacity(size));
  }

  #known(nodeId: string, key: string): void {
    let keys = this.#nodePools.get(nodeId);
    if (keys === undefined) this.#nodePools.set(nodeId, (keys = new Set()));
    keys.add(key);
  }
}

/** The pool's slots plus as much again for the engine's host-RAM prompt cache, in blocks. */
function firstCapacity(pool: Pick<PrefixPool, 'ctx' | 'slots_total'>): number {
  const tokens = Math.max(1, pool.ctx) * Math.max(1, pool.slots_total) * 2;
  return Math.max(MIN_CAPACITY_BLOCKS, Math.ceil((tokens * CHARS_PER_TOKEN) / BLOCK_CHARS));
}
