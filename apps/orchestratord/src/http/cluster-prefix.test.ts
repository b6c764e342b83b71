import { request } from 'undici';
import { describe, expect, it } from 'vitest';
import { FixturePoolManager } from '@llama-orch/fixture-pool-manager';
import { annAuth, CLUSTER_HEARTBEAT_MS, NODE, replicaHarness, until } from '../testing/replica-harness.js';
import { frames, taskBody } from '../testing/test-helpers.js';

// Cache-aware placement across replicas on one Redis (spec 68): what one replica placed, the other
// knows within a pub/sub round trip, so a prefix placed through A goes to the same pool through B.
describe('cache-aware placement across replicas', () => {
  const h = replicaHarness();

  it(
    'a prompt sharing a prefix with one placed through replica A goes, through replica B, to the pool A chose',
    { timeout: 30_000 },
    async () => {
      const replicas = await Promise.all(
        [0, 1].map(() => h.replica('prefix1:', { heartbeat_interval_ms: CLUSTER_HEARTBEAT_MS })),
      );
      const urls: string[] = [];
      for (const r of replicas) urls.push(await r.app.listen({ port: 0, host: '127.0.0.1' }));
      const pools = ['a', 'b', 'c'].map((id) => ({ pool_id: id, models: ['m'], slots: 1 }));
      const node = await FixturePoolManager.start({ nodeId: 'n1', pools, token: NODE, tokenIntervalMs: 2 });
      h.defer(() => node.close());
      expect(await node.register(urls[0]!)).toBe(200);
      await node.startHeartbeats(urls[0]!, CLUSTER_HEARTBEAT_MS);
      h.defer(() => Promise.resolve(node.stopHeartbeats()));
      await until(
        () =>
          replicas.every(
            (r) => r.app.services.registry.poolsForModel('m').filter((v) => v.node_state === 'online').length === 3,
          ),
        'both replicas to see the three pools',
      );
      const doc = (n: number) => `Handbook ${n}. ${`section ${n} of the handbook, `.repeat(60)}`;
      /** Runs one task through `url` to its end; the pool it ran on. */
      const run = async (url: string, prompt: string): Promise<string> => {
        const res = await request(`${url}/v2/tasks`, {
          method: 'POST',
          headers: { ...annAuth, 'content-type': 'application/json' },
          body: JSON.stringify(taskBody({ prompt, max_tokens: 2 })),
        });
        const { streams } = (await res.body.json()) as { streams: { sse: string } };
        const stream = await request(new URL(streams.sse, url), { headers: annAuth });
        const end = frames(await stream.body.text()).at(-1);
        expect(end?.event).toBe('end');
        return String(end?.data.pool_id);
      };
      // through A: three documents, one pool each (a new prefix goes where the index sees the most room)
      const placed = [];
      for (const n of [1, 2, 3]) placed.push(await run(urls[0]!, `${doc(n)} Question ${n}?`));
      expect(new Set(placed).size).toBe(3);
      // through B, each document's follow-up finds the pool A gave it; B's own index was empty, and
      // by room alone (all pools free and equally empty to it) it would have chosen the first by id for all three
      for (const n of [3, 1, 2]) {
        expect(await run(urls[1]!, `${doc(n)} Follow-up ${n}?`), `document ${n}`).toBe(placed[n - 1]);
      }
      // B's `task placed` lines say why: the prefix, with the blocks the pool was expected to hold
      const lines = replicas[1]!.logs.records().filter((l) => l.msg === 'task placed');
      expect(lines.map((l) => l.reason)).toEqual(['prefix', 'prefix', 'prefix']);
      for (const l of lines) expect(l.prefix_blocks).toBeGreaterThanOrEqual(Math.floor(doc(1).length / 256));
    },
  );
});
