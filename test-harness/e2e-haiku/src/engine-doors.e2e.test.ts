import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { OpenAIEmbeddings } from '@langchain/openai';
import { embed, embedMany } from 'ai';
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import OpenAI from 'openai';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  cancelOutcome,
  engineIdle,
  engineUrlOf,
  placedPool,
  repoRoot,
  startCluster,
  waitClusterIdle,
  type Cluster,
} from './index.js';

// The engine-route doors end to end (issue 27): orchestratord → pool-managerd → real llama-server.
// One synthetic embedding model (non-causal, mean pooling) served by two pools — p1 with
// `embeddings: true`, p2 with `reranking: true` — so placement must pick the pool by what the
// request needs, and one synthetic generator with fill-in-the-middle tokens (p3) for /infill.
const EMBED = 'synthetic:llama?role=embed';
// An 8192-token training context, so a long infill stays in flight for seconds (the cancel tests).
const FIM = 'synthetic:llama?ctx=8192&fim=1';
const cacheDir = process.env.LLORCH_TEST_CACHE_DIR ?? join(repoRoot(), '.cache', 'llama-orch');

let cluster: Cluster;
let auth: Record<string, string>;

beforeAll(async () => {
  cluster = await startCluster({
    model: EMBED,
    nodes: 3,
    gpu: 'off',
    cacheDir,
    heartbeatMs: 500,
    readyTimeoutMs: 30 * 60_000,
    pools: [
      { aliases: ['embedder'], config: { embeddings: true } },
      { aliases: ['reranker'], config: { reranking: true } },
      // 8192 tokens: a cancelled infill would run for seconds (see the cancel test)
      { model: FIM, aliases: ['coder'], config: { ctx: 8192 } },
    ],
  });
  auth = { authorization: `Bearer ${cluster.token}` };
}, 31 * 60_000);

afterAll(async () => {
  await cluster?.close();
}, 60_000);

type Json = Record<string, unknown>;

async function post(
  url: string,
  path: string,
  body: object,
  headers: Record<string, string> = {},
): Promise<{ status: number; json: Json }> {
  const res = await request(new URL(path, url), {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
    reset: true,
  });
  return { status: res.statusCode, json: (await res.body.json()) as Json };
}

/** The `data:` events of an SSE body, parsed (llama-server's /infill stream has no `[DONE]`). */
async function sseEvents(
  url: string,
  path: string,
  body: object,
  headers: Record<string, string> = {},
): Promise<{ status: number; events: Json[] }> {
  const res = await request(new URL(path, url), {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
    reset: true,
  });
  const text = await res.body.text();
  const events = text
    .split('\n')
    .filter((l) => l.startsWith('data: '))
    .map((l) => JSON.parse(l.slice(6)) as Json);
  return { status: res.statusCode, events };
}

const openai = (): OpenAI =>
  new OpenAI({ baseURL: `${cluster.orchestrator.url}/v1`, apiKey: cluster.token, maxRetries: 0 });

/** The same embedding: as long as the other (not empty), and equal element by element (an empty one compared nothing). */
function expectSameVector(got: readonly number[], want: readonly number[]): void {
  expect(want.length).toBeGreaterThan(0);
  expect(got).toHaveLength(want.length);
  got.forEach((v, i) => expect(v).toBeCloseTo(want[i]!, 6));
}
describe('capabilities', () => {
  it('/v1/models lists what each model can serve; each pool reports its own', async () => {
    const models = await openai().models.list();
    const byId = new Map(models.data.map((m) => [m.id, (m as unknown as { capabilities?: string[] }).capabilities]));
    // p1 and p2 serve the same model (same ref): one entry, both kinds.
    expect(byId.get('embedder') ?? byId.get('reranker')).toEqual(['embeddings', 'rerank']);
    expect(byId.get('coder')).toEqual(['chat', 'completion', 'infill']);
    const res = await request(new URL('/v2/pools', cluster.orchestrator.url), { headers: auth });
    const pools = ((await res.body.json()) as { pools: Array<{ pool_id: string; capabilities?: string[] }> }).pools;
    expect(Object.fromEntries(pools.map((p) => [p.pool_id, p.capabilities]))).toEqual({
      p1: ['embeddings'],
      p2: ['rerank'],
      p3: ['chat', 'completion', 'infill'],
    });
  });
});

describe('POST /v1/embeddings', () => {
  it("equals the engine's own /v1/embeddings apart from the model name; placed on the embeddings pool", async () => {
    await waitClusterIdle(cluster);
    const correlationId = randomUUID();
    const input = { input: ['racks hum at night', 'the fans spin'], encoding_format: 'float' };
    const door = await post(
      cluster.orchestrator.url,
      '/v1/embeddings',
      { model: EMBED, ...input },
      { ...auth, 'x-correlation-id': correlationId },
    );
    expect(door.status, JSON.stringify(door.json)).toBe(200);
    const engine = await post(await engineUrlOf(cluster, 'p1'), '/v1/embeddings', input);
    expect(engine.status).toBe(200);
    const { model: doorModel, ...doorRest } = door.json;
    const { model: _engineModel, ...engineRest } = engine.json;
    expect(doorRest).toEqual(engineRest);
    expect(doorModel).toBe(EMBED);
    expect(await placedPool(cluster, correlationId)).toBe('p1');
  });

  it('the openai client: float and base64 give the same vectors, with usage', async () => {
    await waitClusterIdle(cluster);
    const client = openai();
    const float = await client.embeddings.create({
      model: 'embedder',
      input: ['one', 'two', 'three'],
      encoding_format: 'float',
    });
    expect(float.data.map((d) => d.index)).toEqual([0, 1, 2]);
    expect(float.data[0]!.embedding).toHaveLength(64);
    expect(float.usage.prompt_tokens).toBeGreaterThan(0);
    expect(float.model).toBe('embedder');
    const b64 = await client.embeddings.create({
      model: 'embedder',
      input: ['one', 'two', 'three'],
      encoding_format: 'base64',
    });
    const raw = b64.data[1]!.embedding as unknown as string;
    expect(typeof raw).toBe('string');
    const bytes = Buffer.from(raw, 'base64');
    const decoded = Array.from(new Float32Array(bytes.buffer, bytes.byteOffset, bytes.length / 4));
    expectSameVector(decoded, float.data[1]!.embedding);
    // Without encoding_format the client asks for base64 and decodes it itself.
    const implicit = await client.embeddings.create({ model: 'embedder', input: 'two' });
    expectSameVector(implicit.data[0]!.embedding, float.data[1]!.embedding);
  });

  it('token-array input, as the engine takes it', async () => {
    const res = await openai().embeddings.create({
      model: 'embedder',
      input: [
        [1, 450, 4996],
        [1, 22172],
      ],
      encoding_format: 'float',
    });
    expect(res.data).toHaveLength(2);
    expect(res.usage.prompt_tokens).toBe(5);
  });

  it('the Vercel AI SDK: embed and embedMany', async () => {
    const provider = createOpenAICompatible({
      name: 'llama-orch',
      baseURL: `${cluster.orchestrator.url}/v1`,
      apiKey: cluster.token,
    });
    const model = provider.embeddingModel('embedder');
    const one = await embed({ model, value: 'sunny day at the beach', maxRetries: 0 });
    expect(one.embedding).toHaveLength(64);
    const many = await embedMany({ model, values: ['a', 'b', 'sunny day at the beach'], maxRetries: 0 });
    expect(many.embeddings).toHaveLength(3);
    expectSameVector(many.embeddings[2]!, one.embedding);
  });

  it('LangChain OpenAIEmbeddings: embedQuery and embedDocuments', async () => {
    const embeddings = new OpenAIEmbeddings({
      model: 'embedder',
      apiKey: cluster.token,
      configuration: { baseURL: `${cluster.orchestrator.url}/v1` },
      maxRetries: 0,
    });
    const query = await embeddings.embedQuery('where is the cooling fan');
    expect(query).toHaveLength(64);
    const docs = await embeddings.embedDocuments(['the fan is in the rack', 'where is the cooling fan']);
    expect(docs).toHaveLength(2);
    expectSameVector(docs[1]!, query);
  });

  it('refusals in OpenAI shape: dimensions, bad input, a model that cannot embed, an unknown model', async () => {
    const url = cluster.orchestrator.url;
    const dims = await post(url, '/v1/embeddings', { model: 'embedder', input: 'x', dimensions: 32 }, auth);
    expect(dims.status).toBe(400);
    expect(dims.json).toEqual({
      error: {
        message: expect.stringContaining('dimensions'),
        type: 'invalid_request_error',
        param: 'dimensions',
        code: 'invalid_value',
      },
    });
    const empty = await post(url, '/v1/embeddings', { model: 'embedder', input: [] }, auth);
    expect(empty.status).toBe(400);
    expect((empty.json.error as Json).param).toBe('input');
    const format = await post(url, '/v1/embeddings', { model: 'embedder', input: 'x', encoding_format: 'int8' }, auth);
    expect(format.status).toBe(400);
    const coder = await post(url, '/v1/embeddings', { model: 'coder', input: 'x' }, auth);
    expect(coder.status).toBe(400);
    expect(coder.json.error).toMatchObject({
      type: 'invalid_request_error',
      param: 'model',
      message: expect.stringContaining('cannot serve embeddings'),
    });
    const unknown = await post(url, '/v1/embeddings', { model: 'nope', input: 'x' }, auth);
    expect(unknown.status).toBe(404);
    expect((unknown.json.error as Json).code).toBe('model_not_found');
    const noKey = await post(url, '/v1/embeddings', { model: 'embedder', input: 'x' });
    expect(noKey.status).toBe(401);
  });
});

describe('POST /v1/rerank and /rerank', () => {
  const body = {
    query: 'cooling fans',
    documents: ['the fan spins', 'a poem about the sea', 'cooling fans in racks'],
    top_n: 2,
  };

  it.each(['/v1/rerank', '/rerank'])(
    "%s equals the engine's own /v1/rerank apart from the model name; placed on the reranking pool",
    async (path) => {
      await waitClusterIdle(cluster);
      const correlationId = randomUUID();
      const door = await post(
        cluster.orchestrator.url,
        path,
        { model: 'reranker', ...body },
        { ...auth, 'x-correlation-id': correlationId },
      );
      expect(door.status, JSON.stringify(door.json)).toBe(200);
      const engine = await post(await engineUrlOf(cluster, 'p2'), '/v1/rerank', body);
      const { model: doorModel, ...doorRest } = door.json;
      const { model: _m, ...engineRest } = engine.json;
      expect(doorRest).toEqual(engineRest);
      expect(doorModel).toBe('reranker');
      expect(door.json.results).toHaveLength(2);
      expect(await placedPool(cluster, correlationId)).toBe('p2');
    },
  );

  it("refusals: /rerank in llama-server's shape, /v1/rerank in OpenAI's", async () => {
    const url = cluster.orchestrator.url;
    const coder = await post(url, '/rerank', { model: 'coder', ...body }, auth);
    expect(coder.status).toBe(400);
    expect(coder.json).toEqual({
      error: { code: 400, message: expect.stringContaining('cannot serve rerank'), type: 'invalid_request_error' },
    });
    const noDocs = await post(url, '/v1/rerank', { model: 'reranker', query: 'q' }, auth);
    expect(noDocs.status).toBe(400);
    expect(noDocs.json.error).toMatchObject({ type: 'invalid_request_error', code: 'invalid_value' });
  });
});

describe('POST /infill', () => {
  const fill = {
    input_prefix: 'def add(a, b):\n    ',
    input_suffix: '\n    return c\n',
    n_predict: 12,
    seed: 7,
    temperature: 0,
  };
  /** Apart from what differs between runs: the model name, timings and the cache's share of the prompt. */
  const comparable = (b: Json): Json => {
    const { model: _m, timings: _t, tokens_cached: _c, id_slot: _s, ...rest } = b;
    return rest;
  };

  it("not streamed: equals the engine's own /infill apart from model, timings and cache figures", async () => {
    await waitClusterIdle(cluster);
    const engineUrl = await engineUrlOf(cluster, 'p3');
    await post(engineUrl, '/infill', { ...fill, stream: false });
    const door = await post(cluster.orchestrator.url, '/infill', { model: 'coder', ...fill }, auth);
    expect(door.status, JSON.stringify(door.json)).toBe(200);
    const engine = await post(engineUrl, '/infill', { ...fill, model: 'coder', stream: false });
    expect(comparable(door.json)).toEqual(comparable(engine.json));
    expect(door.json.model).toBe('coder');
    expect(door.json.tokens_predicted).toBe(12);
  });

  it('streamed: the same pieces as the engine streams, ending with stop: true; model optional when one model serves infill', async () => {
    await waitClusterIdle(cluster);
    const engineUrl = await engineUrlOf(cluster, 'p3');
    const door = await sseEvents(cluster.orchestrator.url, '/infill', { ...fill, stream: true }, auth);
    expect(door.status).toBe(200);
    const engine = await sseEvents(engineUrl, '/infill', { ...fill, stream: true });
    const text = (events: Json[]): string => events.map((e) => e.content as string).join('');
    expect(text(door.events)).toBe(text(engine.events));
    expect(door.events.filter((e) => e.stop !== true)).toHaveLength(12);
    const last = door.events.at(-1)!;
    expect(last).toMatchObject({ stop: true, tokens_predicted: 12, stop_type: 'limit', model: 'coder' });
    expect(last.tokens_evaluated).toBe(engine.events.at(-1)!.tokens_evaluated);
  });

  it.each([false, true])(
    'a client leaving during a long infill (stream: %s) cancels it: the engine slot is freed before it could finish',
    async (stream) => {
      await waitClusterIdle(cluster);
      const engineUrl = await engineUrlOf(cluster, 'p3');
      const ac = new AbortController();
      const correlationId = randomUUID();
      const nPredict = 8000; // the pool runs an 8192-token context
      const pending = request(new URL('/infill', cluster.orchestrator.url), {
        method: 'POST',
        signal: ac.signal,
        headers: { 'content-type': 'application/json', ...auth, 'x-correlation-id': correlationId },
        // logit_bias bans the end-of-text token (id 2): only a cancel stops it before n_predict.
        body: JSON.stringify({ model: 'coder', ...fill, n_predict: nPredict, logit_bias: [[2, false]], stream }),
      }).catch((err: unknown) => err);
      const outcome = await cancelOutcome(cluster, 'p3', () => ac.abort());
      await pending;
      // the engine cancelled the task: released with fewer tokens than the generation would have made
      expect(outcome.cancelled, outcome.lines).toBe(true);
      expect(outcome.nTokens, outcome.lines).toBeLessThan(nPredict);
      // The line may still be in orchestratord's stdout pipe.
      const canceled = (): boolean =>
        cluster
          .allLogs()
          .some(
            (l) =>
              l.source === 'orchestratord' && l.json.correlation_id === correlationId && l.json.msg === 'task canceled',
          );
      for (let i = 0; i < 150 && !canceled(); i++) await new Promise((r) => setTimeout(r, 20));
      expect(canceled()).toBe(true);
      await waitClusterIdle(cluster);
    },
  );

  it("refusals in llama-server's shape: a model without infill, a missing field", async () => {
    const url = cluster.orchestrator.url;
    const embedder = await post(url, '/infill', { model: 'embedder', ...fill }, auth);
    expect(embedder.status).toBe(400);
    expect(embedder.json).toEqual({
      error: { code: 400, message: expect.stringContaining('cannot serve infill'), type: 'invalid_request_error' },
    });
    const missing = await post(url, '/infill', { model: 'coder', input_prefix: 'x' }, auth);
    expect(missing.status).toBe(400);
    expect(missing.json).toEqual({
      error: { code: 400, message: expect.stringContaining('input_suffix'), type: 'invalid_request_error' },
    });
  });
});
