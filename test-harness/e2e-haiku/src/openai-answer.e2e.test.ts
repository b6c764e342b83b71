import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
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

// Non-streamed /v1 requests end to end (issue 28): orchestratord → pool-managerd → one real
// llama-server (synthetic model with its chat template, 4096-token context so a long generation
// stays in flight for seconds). The engine is asked for one answer; the door's body is the
// engine's own.
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

async function post(
  url: string,
  path: string,
  body: object,
  headers: Record<string, string> = {},
): Promise<{ status: number; json: Record<string, unknown> }> {
  const res = await request(new URL(path, url), {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
    reset: true,
  });
  return { status: res.statusCode, json: (await res.body.json()) as Record<string, unknown> };
}

/** The door's request as the engine's own: what pool-managerd sends for it (the door asks for the prompt cache). */
const ENGINE_EXTRA = { cache_prompt: true, stream: false };

/** Without what differs between two runs: id, creation time, model name, and the timing values (keys kept). */
function comparable(body: Record<string, unknown>): Record<string, unknown> {
  const { id: _id, created: _created, model: _model, timings, ...rest } = body;
  return { ...rest, timing_keys: Object.keys((timings ?? {}) as object).sort() };
}

describe('non-streamed /v1 answers against the real engine', () => {
  it.each([
    [
      'chat',
      '/v1/chat/completions',
      { messages: [{ role: 'user', content: 'A poem about cooling fans.' }], max_tokens: 24 },
    ],
    ['completion', '/v1/completions', { prompt: 'The night shift at the data centre', max_tokens: 24 }],
  ] as const)(
    "%s: the body equals the engine's own non-streamed answer at a fixed seed and temperature 0, apart from id, created and model",
    async (kind, path, input) => {
      await waitClusterIdle(cluster);
      const correlationId = randomUUID();
      const engineUrl = await engineUrlOf(cluster, cluster.nodes[0]!.poolId);
      const engineBody =
        kind === 'chat'
          ? { ...input, seed: 5, temperature: 0, ...ENGINE_EXTRA }
          : { prompt: input.prompt, n_predict: input.max_tokens, seed: 5, temperature: 0, ...ENGINE_EXTRA };
      // The same request once first, so the slot's cache holds the prompt for both compared answers.
      await post(engineUrl, path, engineBody);
      const door = await post(
        cluster.orchestrator.url,
        path,
        { model: MODEL, ...input, seed: 5, temperature: 0 },
        { authorization: `Bearer ${cluster.token}`, 'x-correlation-id': correlationId },
      );
      expect(door.status, JSON.stringify(door.json)).toBe(200);
      const engine = await post(engineUrl, path, engineBody);
      expect(engine.status).toBe(200);
      expect(comparable(door.json)).toEqual(comparable(engine.json));
      expect(door.json.model).toBe(MODEL);
      expect(door.json.id).toMatch(kind === 'chat' ? /^chatcmpl-[0-9a-f-]{36}$/ : /^cmpl-[0-9a-f-]{36}$/);
      expect((door.json.usage as { completion_tokens: number }).completion_tokens).toBe(24);
      // Correlated: the same id on orchestratord's placement line and pool-managerd's dispatch lines.
      await placedPool(cluster, correlationId);
      const want = ['dispatch started', 'engine request sent', 'dispatch ended'];
      const pmLines = await correlatedMessages(cluster, correlationId, (source) => source !== 'orchestratord', want);
      expect(pmLines).toEqual(expect.arrayContaining(want));
    },
  );

  it('the task under /v2 shows started then end (tokens from the usage), no token frames; the token counter moves', async () => {
    await waitClusterIdle(cluster);
    const before = metricSum(await scrape(cluster.orchestrator.url), 'llorch_tokens_out_total');
    const door = await post(
      cluster.orchestrator.url,
      '/v1/completions',
      { model: MODEL, prompt: 'Racks hum', max_tokens: 16, seed: 3, temperature: 0 },
      { authorization: `Bearer ${cluster.token}` },
    );
    expect(door.status).toBe(200);
    const taskId = String(door.json.id).slice('cmpl-'.length);
    const res = await request(new URL(`/v2/tasks/${taskId}/events`, cluster.orchestrator.url), {
      headers: { authorization: `Bearer ${cluster.token}` },
    });
    const text = await res.body.text();
    const events = [...text.matchAll(/^event: (\w+)$/gm)].map((m) => m[1]);
    expect(events[0]).toBe('started');
    expect(events).not.toContain('token');
    expect(events.at(-1)).toBe('end');
    expect(text).toMatch(/"tokens_out":16/);
    expect(metricSum(await scrape(cluster.orchestrator.url), 'llorch_tokens_out_total') - before).toBe(16);
  });

  it('a client that leaves during a long generation cancels it: the engine request is aborted and the slot freed before it could finish', async () => {
    await waitClusterIdle(cluster);
    const engineUrl = await engineUrlOf(cluster, cluster.nodes[0]!.poolId);
    const ac = new AbortController();
    const correlationId = randomUUID();
    const maxTokens = 8000; // the pool runs an 8192-token context
    const pending = request(new URL('/v1/completions', cluster.orchestrator.url), {
      method: 'POST',
      signal: ac.signal,
      headers: {
        'content-type': 'application/json',
        authorization: `Bearer ${cluster.token}`,
        'x-correlation-id': correlationId,
      },
      // logit_bias bans the end-of-text token (id 2): only a cancel stops it before max_tokens.
      body: JSON.stringify({
        model: MODEL,
        prompt: 'Keep going',
        max_tokens: maxTokens,
        temperature: 0,
        logit_bias: { 2: -100 },
      }),
    }).catch((err: unknown) => err);
    const outcome = await cancelOutcome(cluster, cluster.nodes[0]!.poolId, () => ac.abort());
    await pending;
    // the engine cancelled the task: released with fewer tokens than the generation would have made
    expect(outcome.cancelled, outcome.lines).toBe(true);
    expect(outcome.nTokens, outcome.lines).toBeLessThan(maxTokens);
    const orchLines = await correlatedMessages(cluster, correlationId, (source) => source === 'orchestratord', [
      'task canceled',
    ]);
    expect(orchLines).toContain('task canceled');
    await waitClusterIdle(cluster);
  });
});
