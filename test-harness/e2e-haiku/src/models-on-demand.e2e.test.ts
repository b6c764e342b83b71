import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import OpenAI from 'openai';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { repoRoot, startCluster, type Cluster } from './index.js';

// The dev cluster's default catalog end to end (issue 40): real orchestratord, pool-managerd and
// llama-server. One node as `scripts/dev.sh up` has it — the chat model in a static pool (alias
// `synthetic`) and memory for loads on request (`on_demand`) — and orchestratord given
// requirements/catalog.yaml, whose embedder, reranker and coder are each loaded on their first
// request. Tests run in order: the first looks at the catalog before anything is loaded.
const CHAT = 'synthetic:llama?ctx=4096';
const CATALOG_FILE = join(repoRoot(), 'requirements', 'catalog.yaml');
const cacheDir = process.env.LLORCH_TEST_CACHE_DIR ?? join(repoRoot(), '.cache', 'llama-orch');
/** A cold load: the model generated (first run), an engine started; far above it on a loaded host. */
const LOAD_MS = 120_000;

let cluster: Cluster;
let auth: Record<string, string>;

beforeAll(async () => {
  cluster = await startCluster({
    model: CHAT,
    nodes: 1,
    gpu: 'off',
    cacheDir,
    heartbeatMs: 500,
    readyTimeoutMs: 30 * 60_000,
    pools: [{ aliases: ['synthetic'] }],
    onDemand: { memory_budget_bytes: 2 * 1024 ** 3, threads: 1 },
    orchestratorEnv: { ORCHD_CATALOG_FILE: CATALOG_FILE },
  });
  auth = { authorization: `Bearer ${cluster.token}` };
  // loads go to online nodes only; the node is `registering` until its first heartbeat
  const deadline = Date.now() + 30_000;
  for (;;) {
    const nodes = (await call('GET', '/v2/nodes')).json.nodes as Array<{ state: string }>;
    if (nodes[0]?.state === 'online') break;
    if (Date.now() > deadline) throw new Error(`the node is not online: ${JSON.stringify(nodes)}`);
    await sleep(100);
  }
}, 31 * 60_000);

afterAll(async () => {
  await cluster?.close();
}, 60_000);

type Json = Record<string, unknown>;

async function call(method: 'GET' | 'POST', path: string, body?: object): Promise<{ status: number; json: Json }> {
  const res = await request(new URL(path, cluster.orchestrator.url), {
    method,
    headers: { ...auth, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: res.statusCode, json: (await res.body.json()) as Json };
}

const openai = (): OpenAI =>
  new OpenAI({ baseURL: `${cluster.orchestrator.url}/v1`, apiKey: cluster.token, maxRetries: 0, timeout: LOAD_MS });

interface ClusterModel {
  id: string;
  aliases: string[];
  status: string;
  pools: string[];
  pinned: boolean;
  last_error?: string;
}

async function catalogModels(): Promise<Map<string, ClusterModel>> {
  const r = await call('GET', '/v2/catalog/models');
  expect(r.status).toBe(200);
  return new Map((r.json.models as ClusterModel[]).map((m) => [m.aliases[0] ?? m.id, m]));
}

/** ms a call takes from request to answer. */
async function timed<T>(f: () => Promise<T>): Promise<{ ms: number; value: T }> {
  const t0 = performance.now();
  const value = await f();
  return { ms: Math.round(performance.now() - t0), value };
}

describe('the default catalog (requirements/catalog.yaml)', () => {
  it('before any load: GET /v1/models lists the chat model and the three catalog models with what they serve', async () => {
    const list = await openai().models.list();
    const caps = new Map(list.data.map((m) => [m.id, (m as unknown as { capabilities?: string[] }).capabilities]));
    expect([...caps.keys()].sort()).toEqual(['coder', 'embedder', 'reranker', 'synthetic']);
    expect(caps.get('synthetic')).toEqual(['chat', 'completion']);
    expect(caps.get('embedder')).toEqual(['embeddings']);
    expect(caps.get('reranker')).toEqual(['rerank']);
    // a generator's policy says `generate`; infill is known once a loaded copy reports it (below)
    expect(caps.get('coder')).toEqual(expect.arrayContaining(['chat', 'completion']));

    const models = await catalogModels();
    expect([...models.keys()].sort()).toEqual(['coder', 'embedder', 'reranker', 'synthetic']);
    expect(models.get('synthetic')).toMatchObject({ status: 'ready', pinned: true, pools: ['e2e-node-1/p1'] });
    for (const name of ['embedder', 'reranker', 'coder'])
      expect(models.get(name), name).toMatchObject({ status: 'registered', pinned: false, pools: [] });
    expect(models.get('reranker')!.id).toBe('synthetic:llama?role=embed&seed=2');
  });

  it(
    '/v1/embeddings on embedder: the first request loads it (cold), the second is served at once (warm)',
    async () => {
      const client = openai();
      const cold = await timed(() =>
        client.embeddings.create({ model: 'embedder', input: ['racks hum at night', 'the fans spin'] }),
      );
      expect(cold.value.data).toHaveLength(2);
      expect(cold.value.data[0]!.embedding.length).toBeGreaterThan(0);
      expect(cold.value.model).toBe('embedder');
      const warm = await timed(() =>
        client.embeddings.create({ model: 'embedder', input: ['racks hum at night', 'the fans spin'] }),
      );
      expect(warm.value.data[0]!.embedding).toEqual(cold.value.data[0]!.embedding);
      // the figures the issue asks for, in the test's output
      process.stdout.write(
        `embeddings on a catalog model: cold (load on first request) ${cold.ms} ms, warm ${warm.ms} ms\n`,
      );
      expect(warm.ms).toBeLessThan(cold.ms);
    },
    LOAD_MS,
  );

  it(
    '/v1/rerank on reranker loads it and answers',
    async () => {
      const r = await call('POST', '/v1/rerank', {
        model: 'reranker',
        query: 'cooling fans',
        documents: ['the fan spins', 'a poem about the sea', 'cooling fans in racks'],
        top_n: 2,
      });
      expect(r.status, JSON.stringify(r.json)).toBe(200);
      expect(r.json.model).toBe('reranker');
      expect(r.json.results).toHaveLength(2);
    },
    LOAD_MS,
  );

  it(
    '/infill on coder loads it and answers',
    async () => {
      const r = await call('POST', '/infill', {
        model: 'coder',
        input_prefix: 'def add(a, b):\n    ',
        input_suffix: '\n    return c\n',
        n_predict: 8,
        temperature: 0,
      });
      expect(r.status, JSON.stringify(r.json)).toBe(200);
      expect(typeof r.json.content).toBe('string');
      expect(r.json.tokens_predicted).toBeGreaterThan(0);
    },
    LOAD_MS,
  );

  it('afterwards GET /v2/catalog/models shows each ready on the node, and /v1/models the infill', async () => {
    const models = await catalogModels();
    for (const name of ['embedder', 'reranker', 'coder']) {
      const m = models.get(name)!;
      expect(m.status, JSON.stringify(m)).toBe('ready');
      expect(m.pools).toHaveLength(1);
      expect(m.pools[0]).toMatch(/^e2e-node-1\//);
    }
    expect(models.get('synthetic')).toMatchObject({ status: 'ready', pools: ['e2e-node-1/p1'] });
    const list = await openai().models.list();
    const coder = list.data.find((m) => m.id === 'coder') as unknown as { capabilities: string[] };
    expect(coder.capabilities).toEqual(['chat', 'completion', 'infill']);
    // what the loads take of the node's budget (its pools' memory_bytes, the static one included)
    const nodes = await call('GET', '/v2/nodes');
    const memory = (nodes.json.nodes as Array<{ memory?: { budget_bytes: number; used_bytes: number } }>)[0]?.memory;
    expect(memory?.budget_bytes).toBe(2 * 1024 ** 3);
    expect(memory!.used_bytes).toBeLessThan(memory!.budget_bytes);
    process.stdout.write(
      `node memory after the three loads: ${(memory!.used_bytes / 2 ** 20).toFixed(0)} MiB of 2048 MiB\n`,
    );
  });

  it('an unknown model is 404 model_not_found', async () => {
    const err = await openai()
      .embeddings.create({ model: 'no-such-model', input: 'x' })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.NotFoundError);
    expect((err as InstanceType<typeof OpenAI.NotFoundError>).code).toBe('model_not_found');
  });
});
