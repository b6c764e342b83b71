import { describe, expect, it } from 'vitest';
import { STORE_KINDS, sleep, storeHarness } from '../testing/store-harness.js';

describe.each(STORE_KINDS)('per-key rate limits (%s store)', (kind) => {
  const h = storeHarness(kind);

  it('60 a minute across 3 replicas lets exactly 60 through, not 180', async () => {
    const clients = await h.open(3);
    const hits = await Promise.all(
      Array.from({ length: 180 }, (_, i) => clients[i % 3]!.rateLimits.hit('alice', 60, 60_000)),
    );
    expect(hits.filter((x) => x.allowed)).toHaveLength(60);
    expect(hits.map((x) => x.count).sort((a, b) => a - b)).toEqual(Array.from({ length: 180 }, (_, i) => i + 1));
    for (const x of hits) {
      expect(x.resetMs).toBeGreaterThan(50_000);
      expect(x.resetMs).toBeLessThanOrEqual(60_000);
    }
    // another key has its own window
    expect(await clients[1]!.rateLimits.hit('bob', 60, 60_000)).toMatchObject({ count: 1, allowed: true });
  });

  it('a window ends after its length and the count starts again', async () => {
    const [a, b] = await h.open(2);
    expect(await a!.rateLimits.hit('k', 2, 500)).toMatchObject({ count: 1, allowed: true });
    expect(await b!.rateLimits.hit('k', 2, 500)).toMatchObject({ count: 2, allowed: true });
    expect(await a!.rateLimits.hit('k', 2, 500)).toMatchObject({ count: 3, allowed: false });
    await sleep(600);
    expect(await b!.rateLimits.hit('k', 2, 500)).toMatchObject({ count: 1, allowed: true });
  });
});
