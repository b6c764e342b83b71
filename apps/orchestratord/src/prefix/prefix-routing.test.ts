import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { createMetrics } from '../support/metrics.js';
import { STORE_KINDS, sleep, storeHarness } from '../testing/store-harness.js';
import {
  LocalPrefixShare,
  parsePrefixNews,
  formatPrefixNews,
  type PrefixNews,
  type PrefixShare,
} from '../store/prefix-share.js';
import type { RegistryEvent } from '../registry/registry-options.js';
import { PrefixRouting, type PrefixPool } from './prefix-routing.js';
import { BLOCK_CHARS, type PromptBlocks } from './prompt-blocks.js';

const POOL: PrefixPool = { node_id: 'n1', pool_id: 'p1', ctx: 1024, slots_total: 1 };
const OTHER: PrefixPool = { node_id: 'n2', pool_id: 'p2', ctx: 1024, slots_total: 1 };
const prompt = (tag: string, n: number, shared: readonly string[] = []): PromptBlocks => {
  const hashes = [...shared, ...Array.from({ length: n }, (_, i) => `${tag}${i}`)];
  return { hashes, chars: hashes.length * BLOCK_CHARS };
};

function routing(share: PrefixShare = new LocalPrefixShare(), replicaId = 'r1', pools: PrefixPool[] = [POOL, OTHER]) {
  const registry = new Registry();
  const metrics = createMetrics(registry, {
    queueDepth: () => ({ interactive: 0, batch: 0 }),
    nodesOnline: () => 0,
    pools: () => [],
  } as never);
  const r = new PrefixRouting({
    share,
    replicaId,
    metrics,
    registry: {
      pool: (key: string) => pools.find((p) => `${p.node_id}/${p.pool_id}` === key) as never,
      subscribe: () => () => undefined,
    },
  });
  const counter = async (name: string, labels: Record<string, string>) => {
    const m = await registry.getSingleMetric(name)?.get();
    return m?.values.find((v) => Object.entries(labels).every(([k, val]) => v.labels[k] === val))?.value ?? 0;
  };
  return { r, counter };
}

describe('prefix routing: learning from answers', () => {
  it('a placed prompt is held by its pool; the answer is counted against the prediction per pool', async () => {
    const { r, counter } = routing();
    const a = prompt('a', 6);
    expect(r.placed(a, POOL)).toEqual({ pool: 'n1/p1', blocks: 0, touched: undefined, clock: 0 });
    expect(Object.fromEntries(r.matches(a)!)).toEqual({ 'n1/p1': 6 });
    const second = r.placed(a, POOL)!;
    expect(second.blocks).toBe(6);
    // 600 prompt tokens, 580 cached: about 5.8 of the 6 blocks (one block of slack) → a hit
    r.answered(a, second, 'p1', 600, 580);
    expect(await counter('llorch_prefix_cache_predictions_total', { pool_id: 'p1', outcome: 'hit' })).toBe(1);
    expect(await counter('llorch_prefix_cache_predicted_tokens_total', { pool_id: 'p1' })).toBe(600);
    expect(await counter('llorch_prefix_cache_actual_tokens_total', { pool_id: 'p1' })).toBe(580);
    r.answered(a, { ...second, blocks: 0 }, 'p1', 600, 580);
    expect(await counter('llorch_prefix_cache_predictions_total', { pool_id: 'p1', outcome: 'unforeseen' })).toBe(1);
    r.close();
  });

  it('a predicted hit that missed shrinks the pool to the entries the hit relied on; cache the index did not expect grows it', () => {
    const big: PrefixPool = { node_id: 'n1', pool_id: 'p1', ctx: 4096, slots_total: 1 };
    const { r } = routing(new LocalPrefixShare(), 'r1', [big]);
    const system = prompt('s', 4).hashes;
    const a = prompt('a', 2, system);
    r.placed(a, big);
    // first estimate: 4096 tokens of slot + as much host cache, at 4 characters a token
    expect(r.capacityOf('n1/p1')).toBe((4096 * 2 * 4) / BLOCK_CHARS);
    for (let i = 0; i < 30; i++) r.placed(prompt(`o${i}-`, 2), big);
    const p = r.placed(a, big)!;
    // all of a was expected; its deepest block was touched first of all, 66 touches before
    expect(p).toEqual({ pool: 'n1/p1', blocks: 6, touched: 1, clock: 66 });
    // the engine had none of it: its cache keeps fewer than the 60 entries touched since
    r.answered(a, p, 'p1', 600, 0);
    expect(r.capacityOf('n1/p1')).toBe(60);
    // 66 entries in a capacity of 60: the 6 oldest (o0..o2) went, a (touched again) stayed
    expect(r.matches(prompt('o2-', 2))).toBeUndefined();
    expect(r.matches(prompt('o3-', 2))?.get('n1/p1')).toBe(2);
    expect(r.matches(a)?.get('n1/p1')).toBe(6);
    // a miss never shrinks below the prompt itself (nor 4 blocks)
    r.answered(a, { ...p, touched: p.clock - 3 }, 'p1', 600, 0);
    expect(r.capacityOf('n1/p1')).toBe(6);
    // cached tokens nobody predicted: the pool keeps more than the index thought, by a quarter each time
    r.answered(a, { ...p, blocks: 0 }, 'p1', 600, 600);
    expect(r.capacityOf('n1/p1')).toBe(8);
    r.close();
  });
});

describe('prefix routing: pools that go away', () => {
  it("forgets a node's pools when it goes, and a pool its node no longer lists as serving", () => {
    const { r } = routing();
    const doc = prompt('doc', 4);
    const p2: PrefixPool = { ...POOL, pool_id: 'p2' };
    r.placed(doc, POOL);
    r.placed(doc, p2);
    r.placed(doc, OTHER);
    expect(Object.keys(Object.fromEntries(r.matches(doc)!)).sort()).toEqual(['n1/p1', 'n1/p2', 'n2/p2']);
    // n1's heartbeat lists p1 ready, p2 not (unloaded, reloading, restarting)
    r.refreshNode('n1', (key) => key === 'n1/p1');
    expect(Object.keys(Object.fromEntries(r.matches(doc)!)).sort()).toEqual(['n1/p1', 'n2/p2']);
    r.forgetNode('n2');
    expect(Object.keys(Object.fromEntries(r.matches(doc)!))).toEqual(['n1/p1']);
    r.forgetNode('n1');
    expect(r.matches(doc)).toBeUndefined();
    expect(r.size).toEqual({ pools: 0, blocks: 0 });
    r.close();
  });
});

describe('prefix routing: registry events', () => {
  it('follows the registry: a node offline is forgotten, a heartbeat forgets its pools not listed as ready', () => {
    const listeners = new Set<(e: RegistryEvent) => void>();
    const ready = new Set(['n1/p1', 'n2/p2']);
    const r = new PrefixRouting({
      share: new LocalPrefixShare(),
      replicaId: 'r1',
      metrics: createMetrics(new Registry(), {} as never),
      registry: {
        pool: (key) => (ready.has(key) ? ({ state: 'ready' } as never) : undefined),
        subscribe: (l) => {
          listeners.add(l);
          return () => listeners.delete(l);
        },
      },
    });
    const doc = prompt('doc', 4);
    r.placed(doc, POOL);
    r.placed(doc, { ...POOL, pool_id: 'p2' });
    r.placed(doc, OTHER);
    const emit = (e: RegistryEvent) => listeners.forEach((l) => l(e));
    emit({ type: 'heartbeat', nodeId: 'n1' });
    expect(Object.keys(Object.fromEntries(r.matches(doc)!)).sort()).toEqual(['n1/p1', 'n2/p2']);
    emit({ type: 'offline', nodeId: 'n2' });
    expect(Object.keys(Object.fromEntries(r.matches(doc)!))).toEqual(['n1/p1']);
    r.close();
    expect(listeners.size).toBe(0);
  });
});

describe.each(STORE_KINDS)('prefix routing across replicas (%s store)', (kind) => {
  const h = storeHarness(kind);

  it("a prompt placed through one replica is matched by the other's index; capacities follow; a replica skips its own news", async () => {
    const [sa, sb] = await h.open(2);
    const a = routing(sa!.prefixes, 'replica-a').r;
    const b = routing(sb!.prefixes, 'replica-b').r;
    const heard: PrefixNews[] = [];
    const stop = sb!.prefixes.subscribe((n) => heard.push(n));
    const doc = prompt('doc', 8);
    // with Redis the subscription is live once a probe comes back
    for (let i = 0; heard.length === 0 && i < 100; i++) {
      a.placed(prompt(`probe${i}-`, 1), OTHER);
      await sleep(20);
    }
    a.placed(doc, POOL);
    const deadline = Date.now() + 3000;
    while (b.matches(doc)?.get('n1/p1') !== 8 && Date.now() < deadline) await sleep(10);
    expect(Object.fromEntries(b.matches(doc) ?? [])).toEqual({ 'n1/p1': 8 });
    // a capacity a learnt from a miss reaches b
    const p = a.placed(doc, POOL)!;
    expect(p.blocks).toBe(8);
    // a miss with nothing touched since: the capacity falls to the prompt itself
    a.answered(doc, p, 'p1', 800, 0);
    expect(a.capacityOf('n1/p1')).toBe(8);
    while (b.capacityOf('n1/p1') !== 8 && Date.now() < deadline + 3000) await sleep(10);
    expect(b.capacityOf('n1/p1')).toBe(8);
    // and back: b sees cache nobody predicted, grows it by a quarter, and a follows
    b.answered(doc, { ...p, blocks: 0 }, 'p1', 800, 800);
    expect(b.capacityOf('n1/p1')).toBe(10);
    while (a.capacityOf('n1/p1') !== 10 && Date.now() < deadline + 6000) await sleep(10);
    expect(a.capacityOf('n1/p1')).toBe(10);
    stop();
    a.close();
    b.close();
  });
});

describe('prefix news on the wire', () => {
  it('round-trips and refuses malformed messages', () => {
    const held: PrefixNews = { kind: 'held', from: 'r1', pool: 'n1/p1', hashes: ['aa', 'bb'] };
    const capacity: PrefixNews = { kind: 'capacity', from: 'r1', pool: 'n1/p1', blocks: 40 };
    expect(parsePrefixNews(formatPrefixNews(held))).toEqual(held);
    expect(parsePrefixNews(formatPrefixNews(capacity))).toEqual(capacity);
    for (const bad of [
      '',
      'held\tr1\tn1/p1',
      'held\tr1\tn1/p1\taa,,bb',
      'capacity\tr1\tn1/p1\t0',
      'capacity\tr1\tn1/p1\tx',
      'other\tr\tp\tx',
      'held\t\tp\tx',
    ])
      expect(parsePrefixNews(bad), bad).toBeUndefined();
  });
});
