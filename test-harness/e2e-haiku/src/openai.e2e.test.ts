import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import OpenAI from 'openai';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { engineIdle, engineUrlOf, placedPool, repoRoot, startCluster, waitClusterIdle, type Cluster } from './index.js';

// The /v1 door driven by the official `openai` client against real orchestratord, pool-managerds
// and llama-servers (synthetic models). p1 serves synthetic:llama under an alias; p2 another
// synthetic model without one, so /v1/models shows both forms of id.
const MODEL = 'synthetic:llama';
const OTHER_MODEL = 'synthetic:llama?seed=7';
const ALIAS = 'tiny-chat';
const cacheDir = process.env.LLORCH_TEST_CACHE_DIR ?? join(repoRoot(), '.cache', 'llama-orch');

let cluster: Cluster;
let client: OpenAI;

beforeAll(async () => {
  cluster = await startCluster({
    model: MODEL,
    nodes: 2,
    gpu: 'off',
    cacheDir,
    heartbeatMs: 500,
    readyTimeoutMs: 30 * 60_000,
    pools: [{ aliases: [ALIAS] }, { model: OTHER_MODEL }],
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

const hello: OpenAI.Chat.ChatCompletionMessageParam[] = [{ role: 'user', content: 'Say hello to the night shift.' }];

/** The models orchestratord reports a pool serving (`GET /v2/pools`). */
async function modelsOf(poolId: string): Promise<string[]> {
  const res = await request(new URL('/v2/pools', cluster.orchestrator.url), {
    headers: { authorization: `Bearer ${cluster.token}` },
  });
  const body = (await res.body.json()) as { pools: Array<{ pool_id: string; models: string[] }> };
  return body.pools.find((p) => p.pool_id === poolId)?.models ?? [];
}

/** A pool's catalog id: the entry of its `models` (GET /v2/pools) that is not the configured ref. */
async function catalogIdOf(poolId: string, ref: string): Promise<string> {
  const id = (await modelsOf(poolId)).find((m) => m !== ref);
  if (id === undefined) throw new Error(`pool ${poolId} reports no catalog id next to ${ref}`);
  return id;
}

describe('/v1 with the openai client: models', () => {
  // The issue: one entry per model a pool serves, id = its alias, else its catalog id.
  it("lists each pool's model once, by alias or else catalog id, and retrieves it by any name", async () => {
    const p2Catalog = await catalogIdOf('p2', OTHER_MODEL);
    const list = await client.models.list();
    const ids = list.data.map((m) => m.id);
    expect([...ids].sort(), JSON.stringify({ p1: await modelsOf('p1'), p2: await modelsOf('p2') })).toEqual(
      [ALIAS, p2Catalog].sort(),
    );
    for (const m of list.data)
      expect(m).toMatchObject({ object: 'model', created: expect.any(Number), owned_by: expect.any(String) });
    for (const name of [ALIAS, p2Catalog, MODEL, OTHER_MODEL, await catalogIdOf('p1', MODEL)]) {
      await expect(client.models.retrieve(name), name).resolves.toMatchObject({ id: name, object: 'model' });
    }
  });

  it('serves a request naming the alias, the ref or the catalog id on the pool that has that model', async () => {
    const names = [
      [ALIAS, 'p1'],
      [MODEL, 'p1'],
      [await catalogIdOf('p1', MODEL), 'p1'],
      [OTHER_MODEL, 'p2'],
      [await catalogIdOf('p2', OTHER_MODEL), 'p2'],
    ] as const;
    for (const [model, pool] of names) {
      const correlationId = randomUUID();
      const r = await client.chat.completions.create(
        { model, messages: hello, max_tokens: 2 },
        { headers: { 'x-correlation-id': correlationId } },
      );
      expect(r.choices[0]?.message.role, model).toBe('assistant');
      expect(await placedPool(cluster, correlationId), model).toBe(pool);
    }
  });
});

describe('/v1 with the openai client: chat and completions', () => {
  it('answers a chat non-streaming and streaming with the same greedy text and usage', async () => {
    const body = { model: ALIAS, messages: hello, max_tokens: 12, seed: 5, temperature: 0 };
    const whole = await client.chat.completions.create(body);
    expect(whole).toMatchObject({ object: 'chat.completion', model: expect.any(String), created: expect.any(Number) });
    expect(whole.choices).toHaveLength(1);
    const choice = whole.choices[0]!;
    expect(choice.message.role).toBe('assistant');
    expect(choice.message.content?.length ?? 0).toBeGreaterThan(0);
    expect(['stop', 'length']).toContain(choice.finish_reason);
    const usage = whole.usage!;
    expect(usage.prompt_tokens).toBeGreaterThan(0);
    expect(usage.completion_tokens).toBeGreaterThan(0);
    expect(usage.completion_tokens).toBeLessThanOrEqual(12);
    expect(usage.total_tokens).toBe(usage.prompt_tokens + usage.completion_tokens);
    // Either finish can happen with a random model; each one fixes the count ('length': the cap of
    // 12 was reached; 'stop': the model stopped before it).
    if (choice.finish_reason === 'length') expect(usage.completion_tokens).toBe(12);
    else expect(usage.completion_tokens, `finish_reason ${choice.finish_reason}`).toBeLessThan(12);

    const stream = await client.chat.completions.create({
      ...body,
      stream: true,
      stream_options: { include_usage: true },
    });
    const chunks: OpenAI.Chat.ChatCompletionChunk[] = [];
    for await (const c of stream) chunks.push(c);
    expect(chunks.every((c) => c.object === 'chat.completion.chunk' && c.id === chunks[0]!.id)).toBe(true);
    const text = chunks.map((c) => c.choices[0]?.delta.content ?? '').join('');
    expect(text).toBe(choice.message.content);
    expect(chunks.filter((c) => c.choices[0]?.finish_reason).map((c) => c.choices[0]!.finish_reason)).toEqual([
      choice.finish_reason,
    ]);
    const last = chunks.at(-1)!;
    expect(last.choices).toEqual([]);
    expect(last.usage).toMatchObject({
      prompt_tokens: usage.prompt_tokens,
      completion_tokens: usage.completion_tokens,
      total_tokens: usage.total_tokens,
    });
    // without include_usage no usage chunk is sent
    const plain = await client.chat.completions.create({ ...body, stream: true });
    const plainChunks: OpenAI.Chat.ChatCompletionChunk[] = [];
    for await (const c of plain) plainChunks.push(c);
    expect(plainChunks.some((c) => c.usage)).toBe(false);
    expect(plainChunks.map((c) => c.choices[0]?.delta.content ?? '').join('')).toBe(text);
  });

  it('answers a text completion non-streaming and streaming with the same greedy text', async () => {
    const body = {
      model: MODEL,
      prompt: 'Once upon a time, in a data centre,',
      max_tokens: 10,
      seed: 9,
      temperature: 0,
    };
    const whole = await client.completions.create(body);
    expect(whole).toMatchObject({ object: 'text_completion' });
    const choice = whole.choices[0]!;
    expect(choice.text.length).toBeGreaterThan(0);
    expect(['stop', 'length']).toContain(choice.finish_reason);
    expect(whole.usage?.completion_tokens).toBeGreaterThan(0);
    expect(whole.usage?.prompt_tokens).toBeGreaterThan(0);
    const stream = await client.completions.create({ ...body, stream: true, stream_options: { include_usage: true } });
    const chunks: OpenAI.Completion[] = [];
    for await (const c of stream) chunks.push(c);
    expect(chunks.every((c) => c.object === 'text_completion')).toBe(true);
    expect(chunks.map((c) => c.choices[0]?.text ?? '').join('')).toBe(choice.text);
    expect(chunks.at(-1)?.usage?.completion_tokens).toBe(whole.usage?.completion_tokens);
  });

  it('an abort mid-stream frees the engine slot, and the next request runs', async () => {
    const engine = await engineUrlOf(cluster, 'p1');
    await waitClusterIdle(cluster);
    const stream = await client.chat.completions.create({
      model: ALIAS,
      messages: hello,
      max_tokens: 1500,
      seed: 3,
      temperature: 0.8,
      stream: true,
    });
    let contentChunks = 0;
    let busyAtAbort = false;
    for await (const c of stream) {
      if (c.choices[0]?.delta.content) contentChunks += 1;
      if (contentChunks === 3) {
        busyAtAbort = !(await engineIdle(engine));
        stream.controller.abort();
        break;
      }
    }
    const abortedAt = Date.now();
    expect(busyAtAbort, 'the engine was still generating when the client aborted').toBe(true);
    let idle = false;
    while (!idle && Date.now() - abortedAt < 2000) {
      idle = await engineIdle(engine);
      if (!idle) await sleep(20);
    }
    expect(idle, 'engine slot idle within 2 s of the abort').toBe(true);
    await waitClusterIdle(cluster);
    const next = await client.chat.completions.create({ model: ALIAS, messages: hello, max_tokens: 4 });
    expect(next.usage?.completion_tokens).toBeGreaterThan(0);
  });
});

describe("/v1 with the openai client: errors in OpenAI's shape", () => {
  it('404 model_not_found for a model no pool serves', async () => {
    const err = await client.chat.completions
      .create({ model: 'no-such-model', messages: hello })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.NotFoundError);
    expect(err).toMatchObject({ status: 404, code: 'model_not_found' });
    const viaModels = await client.models.retrieve('no-such-model').catch((e: unknown) => e);
    expect(viaModels).toMatchObject({ status: 404, code: 'model_not_found' });
  });

  it('400 naming the param for an out-of-range or unsupported field', async () => {
    for (const [extra, param] of [
      [{ temperature: 5 }, 'temperature'],
      [{ n: 2 }, 'n'],
      [{ top_p: -1 }, 'top_p'],
      [{ max_tokens: 0 }, 'max_tokens'],
    ] as const) {
      const err = await client.chat.completions
        .create({ model: ALIAS, messages: hello, ...extra })
        .catch((e: unknown) => e);
      expect(err, param).toBeInstanceOf(OpenAI.BadRequestError);
      expect(err, param).toMatchObject({ status: 400, param: expect.stringContaining(param) });
    }
    const noMessages = await client.chat.completions.create({ model: ALIAS, messages: [] }).catch((e: unknown) => e);
    expect(noMessages).toMatchObject({ status: 400, param: expect.stringContaining('messages') });
  });

  it('401 for a wrong API key, on every route', async () => {
    const wrong = new OpenAI({
      baseURL: `${cluster.orchestrator.url}/v1`,
      apiKey: 'not-the-key-0123456789',
      maxRetries: 0,
    });
    await expect(wrong.models.list()).rejects.toBeInstanceOf(OpenAI.AuthenticationError);
    await expect(wrong.chat.completions.create({ model: ALIAS, messages: hello })).rejects.toMatchObject({
      status: 401,
    });
    await expect(wrong.completions.create({ model: ALIAS, prompt: 'x' })).rejects.toMatchObject({ status: 401 });
  });
});
