import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  cancelOutcome,
  correlatedMessages,
  engineIdle,
  engineUrlOf,
  metricSum,
  placedPool,
  repoRoot,
  scrape,
  startCluster,
  waitClusterIdle,
  type Cluster,
} from './index.js';

// The Anthropic Messages and Responses doors share the /v1 path's admission, logs, metrics and
// cancel on disconnect (issue 27): checked here against a real cluster, for each door streamed and
// not. The pool's 4096-token context keeps a 2,000-token generation in flight for seconds.
const MODEL = 'synthetic:llama?ctx=8192';
const cacheDir = process.env.LLORCH_TEST_CACHE_DIR ?? join(repoRoot(), '.cache', 'llama-orch');

let cluster: Cluster;

beforeAll(async () => {
  // An 8192-token context, so a cancelled generation would run for seconds: llama-server notices a
  // non-streamed client gone only after a second without results, and the check must tell that from the end.
  cluster = await startCluster({
    model: MODEL,
    nodes: 1,
    gpu: 'off',
    cacheDir,
    heartbeatMs: 500,
    readyTimeoutMs: 30 * 60_000,
    pools: [{ config: { ctx: 8192 } }],
  });
}, 31 * 60_000);

afterAll(async () => {
  await cluster?.close();
}, 60_000);

const doors = {
  messages: {
    path: '/v1/messages',
    door: 'anthropic',
    body: (max: number) => ({
      model: MODEL,
      max_tokens: max,
      temperature: 0,
      messages: [{ role: 'user', content: 'Keep going' }],
    }),
  },
  responses: {
    path: '/v1/responses',
    door: 'responses',
    body: (max: number) => ({ model: MODEL, max_output_tokens: max, temperature: 0, input: 'Keep going' }),
  },
} as const;

const cases = [
  ['messages', true],
  ['messages', false],
  ['responses', true],
  ['responses', false],
] as const;

describe('the Messages and Responses doors on the one admission path', () => {
  it.each(cases)(
    '%s (stream %s): correlated lines on both daemons with the door named, the token counter moves',
    async (name, stream) => {
      await waitClusterIdle(cluster);
      const d = doors[name];
      const correlationId = randomUUID();
      const before = metricSum(await scrape(cluster.orchestrator.url), 'llorch_tokens_out_total');
      const res = await request(new URL(d.path, cluster.orchestrator.url), {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          authorization: `Bearer ${cluster.token}`,
          'x-correlation-id': correlationId,
        },
        body: JSON.stringify({ ...d.body(16), stream }),
      });
      expect(res.statusCode).toBe(200);
      expect(res.headers['x-correlation-id']).toBe(correlationId);
      await res.body.text();
      await placedPool(cluster, correlationId);
      // both daemons buffer their log lines up to 100 ms: wait for pool-managerd's
      await correlatedMessages(cluster, correlationId, (source) => source !== 'orchestratord', [
        'dispatch started',
        'dispatch ended',
      ]);
      const lines = cluster.allLogs().filter((l) => l.json.correlation_id === correlationId);
      expect(
        lines
          .filter((l) => l.source === 'orchestratord')
          .every((l) => l.json.door === d.door || l.json.task_id === undefined),
      ).toBe(true);
      expect(lines.some((l) => l.source === 'orchestratord' && l.json.door === d.door)).toBe(true);
      expect(lines.filter((l) => l.source !== 'orchestratord').map((l) => l.json.msg)).toEqual(
        expect.arrayContaining(['dispatch started', 'dispatch ended']),
      );
      for (
        let i = 0;
        i < 50 && metricSum(await scrape(cluster.orchestrator.url), 'llorch_tokens_out_total') - before < 16;
        i++
      )
        await sleep(20);
      expect(metricSum(await scrape(cluster.orchestrator.url), 'llorch_tokens_out_total') - before).toBe(16);
    },
  );

  it.each(cases)(
    '%s (stream %s): a client that leaves a long generation cancels it; the engine slot is freed before it could finish',
    async (name, stream) => {
      await waitClusterIdle(cluster);
      const d = doors[name];
      const engineUrl = await engineUrlOf(cluster, cluster.nodes[0]!.poolId);
      const correlationId = randomUUID();
      const maxTokens = 8000; // the pool runs an 8192-token context
      const ac = new AbortController();
      const pending = request(new URL(d.path, cluster.orchestrator.url), {
        method: 'POST',
        signal: ac.signal,
        headers: {
          'content-type': 'application/json',
          authorization: `Bearer ${cluster.token}`,
          'x-correlation-id': correlationId,
        },
        body: JSON.stringify({ ...d.body(maxTokens), stream }),
      })
        .then((r) => r.body.text())
        .catch((err: unknown) => err);
      const outcome = await cancelOutcome(cluster, cluster.nodes[0]!.poolId, () => ac.abort());
      await pending;
      // the engine cancelled the task: released with fewer tokens than the generation would have made
      expect(outcome.cancelled, outcome.lines).toBe(true);
      expect(outcome.nTokens, outcome.lines).toBeLessThan(maxTokens);
      for (let i = 0; i < 50; i++) {
        if (
          cluster
            .allLogs()
            .some(
              (l) =>
                l.source === 'orchestratord' &&
                l.json.correlation_id === correlationId &&
                l.json.msg === 'task canceled',
            )
        )
          break;
        await sleep(20);
      }
      const orchLines = cluster
        .allLogs()
        .filter((l) => l.source === 'orchestratord' && l.json.correlation_id === correlationId)
        .map((l) => l.json.msg);
      expect(orchLines).toContain('task canceled');
      await waitClusterIdle(cluster);
    },
  );
});
