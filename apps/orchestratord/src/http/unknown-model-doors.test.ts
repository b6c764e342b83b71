// A model neither in the catalog nor served is a 404 on every door, in that door's shape — never a
// retriable 503 with Retry-After; a catalog model loaded nowhere is still 503 MODEL_NOT_AVAILABLE
// (.specs/67-models-on-demand.md). /v1 chat is driven by the official `openai` client.
import { AnthropicErrorSchema, ErrorEnvelopeSchema, OpenAiErrorSchema } from '@llama-orch/contracts';
import OpenAI from 'openai';
import { afterEach, describe, expect, it } from 'vitest';
import { STORE_KINDS, storeHarness } from '../testing/store-harness.js';
import {
  makeApp as makeTestApp,
  registerNode,
  snapshot,
  storeOf,
  TOKEN,
  type TestApp,
} from '../testing/test-helpers.js';

describe.each(STORE_KINDS)('unknown models on every door (%s store)', (kind) => {
  const stores = storeHarness(kind);
  let t: TestApp | undefined;
  afterEach(async () => {
    await t?.close();
    t = undefined;
  });
  const start = async (): Promise<{ t: TestApp; client: OpenAI }> => {
    t = await makeTestApp({}, {}, undefined, undefined, storeOf(kind, stores));
    await t.app.listen({ host: '127.0.0.1', port: 0 });
    const address = t.app.server.address();
    const port = typeof address === 'object' && address !== null ? address.port : 0;
    // maxRetries 0: the client retries 5xx by itself, which would hide a 503.
    const client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: TOKEN, maxRetries: 0 });
    await registerNode(t, 'n1', [snapshot({ pool_id: 'p', models: ['served'], aliases: ['served-alias'] })]);
    const registered = await t.app.inject({
      method: 'POST',
      url: '/v2/catalog/models',
      headers: t.auth,
      payload: { ref: 'hf:org/repo/lazy.gguf', aliases: ['lazy'] },
    });
    expect(registered.statusCode).toBe(201);
    return { t, client };
  };

  it('/v1 chat through the openai client: NotFoundError model_not_found for an unknown model; 503 for a catalog model no node can load', async () => {
    const { client } = await start();
    const messages = [{ role: 'user' as const, content: 'hi' }];
    const err = await client.chat.completions.create({ model: 'nope', messages }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.NotFoundError);
    const notFound = err as InstanceType<typeof OpenAI.NotFoundError>;
    expect(notFound.status).toBe(404);
    expect(notFound.error).toMatchObject({ code: 'model_not_found', param: 'model', type: 'not_found_error' });
    expect(notFound.headers?.get('retry-after')).toBeNull();
    const lazy = await client.chat.completions.create({ model: 'lazy', messages }).catch((e: unknown) => e);
    expect(lazy).toBeInstanceOf(OpenAI.APIError);
    expect((lazy as InstanceType<typeof OpenAI.APIError>).status).toBe(503);
    expect((lazy as InstanceType<typeof OpenAI.APIError>).error).toMatchObject({ code: 'INSUFFICIENT_MEMORY' });
    expect(Number((lazy as InstanceType<typeof OpenAI.APIError>).headers?.get('retry-after'))).toBeGreaterThanOrEqual(
      1,
    );
  });

  it('/v1 completions, embeddings, rerank and responses, /rerank and /infill: 404 in their shapes, no Retry-After', async () => {
    const { t } = await start();
    const post = (url: string, payload: object) => t.app.inject({ method: 'POST', url, headers: t.auth, payload });
    const openAiShaped: Array<[string, object]> = [
      ['/v1/completions', { model: 'nope', prompt: 'hi' }],
      ['/v1/embeddings', { model: 'nope', input: 'x' }],
      ['/v1/rerank', { model: 'nope', query: 'q', documents: ['a'] }],
      ['/v1/responses', { model: 'nope', input: 'hi' }],
    ];
    for (const [url, payload] of openAiShaped) {
      const res = await post(url, payload);
      expect(res.statusCode, url).toBe(404);
      expect(res.headers['retry-after'], url).toBeUndefined();
      expect(OpenAiErrorSchema.parse(res.json()).error, url).toMatchObject({
        code: 'model_not_found',
        type: 'not_found_error',
        message: expect.stringContaining("model 'nope' not found"),
      });
    }
    for (const [url, payload] of [
      ['/rerank', { model: 'nope', query: 'q', documents: ['a'] }],
      ['/infill', { model: 'nope', input_prefix: 'a', input_suffix: 'b' }],
    ] as const) {
      const res = await post(url, payload);
      expect(res.statusCode, url).toBe(404);
      expect(res.headers['retry-after'], url).toBeUndefined();
      expect(res.json(), url).toEqual({
        error: { code: 404, message: expect.stringContaining("model 'nope' not found"), type: 'not_found_error' },
      });
    }
    // a catalog model loaded nowhere is the cluster's to fix: 503 with Retry-After on these doors too
    const lazy = await post('/v1/embeddings', { model: 'lazy', input: 'x' });
    expect(lazy.statusCode).toBe(503);
    expect(Number(lazy.headers['retry-after'])).toBeGreaterThanOrEqual(1);
  });

  it('/v2 tasks: 404 MODEL_NOT_FOUND envelope; Anthropic messages: not_found_error; neither retriable', async () => {
    const { t } = await start();
    const v2 = await t.app.inject({
      method: 'POST',
      url: '/v2/tasks',
      headers: t.auth,
      payload: { model_ref: 'nope', prompt: 'hi', max_tokens: 4, workload: 'completion', engine: 'llamacpp', ctx: 0 },
    });
    expect(v2.statusCode).toBe(404);
    expect(ErrorEnvelopeSchema.parse(v2.json())).toMatchObject({ code: 'MODEL_NOT_FOUND', retriable: false });
    expect(v2.headers['retry-after']).toBeUndefined();
    const anthropic = await t.app.inject({
      method: 'POST',
      url: '/v1/messages',
      headers: { 'x-api-key': TOKEN, 'anthropic-version': '2023-06-01' },
      payload: { model: 'nope', max_tokens: 4, messages: [{ role: 'user', content: 'hi' }] },
    });
    expect(anthropic.statusCode).toBe(404);
    expect(anthropic.headers['retry-after']).toBeUndefined();
    expect(AnthropicErrorSchema.parse(anthropic.json())).toEqual({
      type: 'error',
      error: { type: 'not_found_error', message: expect.stringContaining("model 'nope' not found") },
    });
  });

  it('GET /v1/models lists catalog models, loaded or not, by their first alias; retrieve finds them by any name', async () => {
    const { client } = await start();
    const ids: string[] = [];
    for await (const m of client.models.list()) ids.push(m.id);
    expect(ids).toEqual(['lazy', 'served-alias']);
    expect(await client.models.retrieve('hf:org/repo/lazy.gguf')).toMatchObject({
      id: 'hf:org/repo/lazy.gguf',
      capabilities: ['chat', 'completion'],
    });
    expect((await client.models.retrieve('lazy')).id).toBe('lazy');
    expect(await client.models.retrieve('nope').catch((e: unknown) => e)).toBeInstanceOf(OpenAI.NotFoundError);
  });
});
