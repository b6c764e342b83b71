import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { metricSum, scrape } from './metrics.js';
import { placedPool, repoRoot, startCluster, type Cluster } from './index.js';

// Cache-aware placement (spec 68) with real engines: three one-slot pools whose llama-server keeps
// only the prompt in its slot (`--cache-ram 0`), and three long system prompts sent in turn, with no
// session ids. Under least-loaded every one of these sequential requests lands on the first pool
// (all are free, ties go by pool id) and each evicts the last; cache-aware gives each prefix a pool
// of its own and keeps sending it there.
const MODEL = 'synthetic:llama?ctx=2048';
const cacheDir = process.env.LLORCH_TEST_CACHE_DIR ?? join(repoRoot(), '.cache', 'llama-orch');
const WORDS = ['amber', 'basalt', 'cobalt', 'dune', 'ember', 'fjord', 'glacier', 'harbor', 'iris', 'juniper', 'kelp'];

let cluster: Cluster;
let client: OpenAI;

beforeAll(async () => {
  cluster = await startCluster({
    model: MODEL,
    nodes: 3,
    gpu: 'off',
    cacheDir,
    heartbeatMs: 500,
    readyTimeoutMs: 30 * 60_000,
    pools: [1, 2, 3].map(() => ({ extraFlags: ['--cache-ram', '0'] })),
    orchestratorEnv: { ORCHESTRATORD_PLACEMENT_STRATEGY: 'cache-aware' },
  });
  client = new OpenAI({
    baseURL: `${cluster.orchestrator.url}/v1`,
    apiKey: cluster.token,
    maxRetries: 0,
    timeout: 60_000,
  });
}, 31 * 60_000);

afterAll(async () => {
  await cluster?.close();
}, 60_000);

/** A tenant's system prompt: ~1,600 characters of its own words. */
function system(tenant: number): string {
  const words = Array.from({ length: 220 }, (_, i) => WORDS[(i * (tenant + 3) + tenant) % WORDS.length]);
  return `Tenant ${tenant} handbook. ${words.join(' ')}. Answer from the handbook.`;
}

async function ask(tenant: number, question: string) {
  const correlationId = randomUUID();
  const stream = await client.chat.completions.create(
    {
      model: MODEL,
      messages: [
        { role: 'system', content: system(tenant) },
        { role: 'user', content: question },
      ],
      max_tokens: 4,
      stream: true,
      stream_options: { include_usage: true },
    },
    { headers: { 'x-correlation-id': correlationId } },
  );
  let usage: OpenAI.CompletionUsage | undefined;
  for await (const c of stream) if (c.usage) usage = c.usage;
  return {
    tenant,
    pool: await placedPool(cluster, correlationId),
    prompt: usage!.prompt_tokens,
    cached: usage!.prompt_tokens_details?.cached_tokens ?? 0,
  };
}

describe('cache-aware placement with real engines', () => {
  it('tenants sharing long prefixes each keep a pool, and their later requests find the prefix cached there', async () => {
    const first = [];
    for (const t of [0, 1, 2]) first.push(await ask(t, `Question ${t}: where is the exit?`));
    // new prefixes go where the index sees the most room: one pool each
    expect(new Set(first.map((r) => r.pool)).size, JSON.stringify(first)).toBe(3);
    const later = [];
    for (const [i, t] of [2, 0, 1, 1, 2, 0].entries()) later.push(await ask(t, `Follow-up ${i}: and the stairs?`));
    const summary = JSON.stringify(later);
    for (const r of later) {
      expect(r.pool, summary).toBe(first[r.tenant]!.pool);
      // the system prompt is most of the prompt: all of it came from the slot's cache
      expect(r.cached, summary).toBeGreaterThanOrEqual(r.prompt * 0.8);
    }
    const metrics = await scrape(cluster.orchestrator.url);
    expect(metricSum(metrics, 'llorch_placement_reason_total'), 'placements counted').toBeGreaterThanOrEqual(9);
    const prefixPlaced = /llorch_placement_reason_total\{reason="prefix"\} (\d+)/.exec(metrics)?.[1];
    expect(Number(prefixPlaced), metrics).toBeGreaterThanOrEqual(6);
    const hits = [...metrics.matchAll(/llorch_prefix_cache_predictions_total\{[^}]*outcome="hit"[^}]*\} (\d+)/g)];
    expect(
      hits.reduce((n, m) => n + Number(m[1]), 0),
      'every later request was a predicted hit the engine confirmed',
    ).toBeGreaterThanOrEqual(6);
    expect(metricSum(metrics, 'llorch_prefix_cache_actual_tokens_total')).toBeGreaterThan(0);
  });
});
