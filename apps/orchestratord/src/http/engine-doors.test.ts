// The engine-route doors over a listening app with FIXTURE nodes: what the dispatch carries, the
// answer the door makes of the node's body, placement by capability, and refusals in each door's
// shape. With the real engines: test-harness/e2e-haiku/src/engine-doors.e2e.test.ts.
import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { startCluster, type Cluster } from '../testing/openai-cluster.js';
import { TOKEN, waitFor } from '../testing/test-helpers.js';

const EMBED = {
  pool_id: 'e',
  models: ['emb-model'],
  aliases: ['embedder'],
  slots: 1,
  capabilities: ['embeddings' as const],
};
const RERANK = { pool_id: 'r', models: ['emb-model'], slots: 1, capabilities: ['rerank' as const] };
const CODER = {
  pool_id: 'c',
  models: ['code-model'],
  aliases: ['coder'],
  slots: 1,
  capabilities: ['chat' as const, 'completion' as const, 'infill' as const],
};
const OLD = { pool_id: 'o', models: ['old-model'], slots: 1 };

type Json = Record<string, unknown>;

describe('engine-route doors', () => {
  let c: Cluster | undefined;
  afterEach(async () => {
    await c?.close();
    c = undefined;
  });

  async function post(
    path: string,
    body: unknown,
    headers: Record<string, string> = {},
  ): Promise<{ status: number; json: Json; headers: Record<string, unknown> }> {
    const res = await request(`${c?.url ?? ''}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${TOKEN}`, ...headers },
      body: JSON.stringify(body),
    });
    return { status: res.statusCode, json: (await res.body.json()) as Json, headers: res.headers };
  }

  it("forwards the door's body as an engine call on the one-answer path; the answer is the node's body with the model asked for", async () => {
    // The fixture "generates" n_predict tokens for the infill (1024 by default): 1 ms apart.
    c = await startCluster([{ nodeId: 'n1', pools: [EMBED, RERANK, CODER], tokenIntervalMs: 1 }]);
    const node = c.nodes[0]!;
    const body = { model: 'embedder', input: ['a', 'b'], encoding_format: 'base64', user: 'u' };
    const res = await post('/v1/embeddings', body, { 'x-correlation-id': 'corr-embed-1' });
    expect(res.status, JSON.stringify(res.json)).toBe(200);
    expect(res.json).toMatchObject({ object: 'fixture_call', kind: 'embeddings', received: body, model: 'embedder' });
    const d = node.dispatches.at(-1)!;
    expect(d.pool_id).toBe('e');
    expect(d.body).toMatchObject({ call: { kind: 'embeddings', body }, stream: false });
    expect(d.body.prompt).toBeUndefined();
    expect(d.correlationId).toBe('corr-embed-1');

    // Same model, another pool: rerank goes where rerank is served, under either path.
    for (const path of ['/v1/rerank', '/rerank']) {
      const rr = await post(path, { model: 'emb-model', query: 'q', documents: ['x', 'y'] });
      expect(rr.status).toBe(200);
      expect(node.dispatches.at(-1)!.pool_id).toBe('r');
      expect(rr.json.model).toBe('emb-model');
    }
    // Infill without a model: the one model that serves it; n_predict defaults into the body.
    const fill = await post('/infill', { input_prefix: 'a', input_suffix: 'b' });
    expect(fill.status, JSON.stringify(fill.json)).toBe(200);
    expect(node.dispatches.at(-1)).toMatchObject({
      pool_id: 'c',
      body: { call: { kind: 'infill', body: { input_prefix: 'a', input_suffix: 'b', n_predict: 1024 } } },
    });
    expect(fill.json.model).toBe('coder');
  });

  it('a streamed infill is relayed as llama-server streams /infill: one event per piece, a last stop: true, no [DONE]', async () => {
    c = await startCluster([{ nodeId: 'n1', pools: [CODER], tokenIntervalMs: 2 }]);
    const res = await request(`${c.url}/infill`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${TOKEN}` },
      body: JSON.stringify({ model: 'coder', input_prefix: 'a', input_suffix: 'b', n_predict: 3, stream: true }),
    });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/event-stream/);
    const events = (await res.body.text()).split('\n\n').filter((e) => e !== '');
    expect(events.every((e) => e.startsWith('data: '))).toBe(true);
    const parsed = events.map((e) => JSON.parse(e.slice(6)) as Json);
    expect(parsed.slice(0, -1).map((e) => e.content)).toEqual(['tok0 ', 'tok1 ', 'tok2 ']);
    expect(parsed.at(-1)).toMatchObject({
      content: '',
      stop: true,
      model: 'coder',
      tokens_predicted: 3,
      stop_type: 'limit',
    });
    expect(c.nodes[0]!.dispatches.at(-1)!.body).toMatchObject({ call: { kind: 'infill' } });
    expect(c.nodes[0]!.dispatches.at(-1)!.body.stream).toBeUndefined();
  });

  it("refuses a kind no pool of the model serves with a 400 in the door's shape; a pool that reports nothing serves chat and completion only", async () => {
    c = await startCluster([{ nodeId: 'n1', pools: [EMBED, CODER, OLD] }]);
    const emb = await post('/v1/embeddings', { model: 'coder', input: 'x' });
    expect(emb.status).toBe(400);
    expect(emb.json).toEqual({
      error: {
        message: expect.stringContaining('cannot serve embeddings: its pools serve chat, completion, infill'),
        type: 'invalid_request_error',
        param: 'model',
        code: 'invalid_value',
      },
    });
    const rr = await post('/rerank', { model: 'embedder', query: 'q', documents: ['x'] });
    expect(rr.json).toEqual({
      error: {
        code: 400,
        message: expect.stringContaining('cannot serve rerank: its pools serve embeddings'),
        type: 'invalid_request_error',
      },
    });
    expect(
      (await post('/infill', { model: 'old-model', input_prefix: 'a', input_suffix: 'b' })).json.error,
    ).toMatchObject({ code: 400 });
    // The chat door refuses the same way; a pool that reports no capabilities still serves chat.
    expect(
      (await post('/v1/chat/completions', { model: 'embedder', messages: [{ role: 'user', content: 'x' }] })).status,
    ).toBe(400);
    expect(
      (
        await post('/v1/chat/completions', {
          model: 'old-model',
          messages: [{ role: 'user', content: 'x' }],
          max_tokens: 2,
        })
      ).status,
    ).toBe(200);
    expect(c.nodes[0]!.dispatches.map((d) => d.pool_id)).toEqual(['o']);
  });

  it('infill for a generation pool whose engine has not said yet waits in the queue instead of a 400', async () => {
    c = await startCluster([
      { nodeId: 'n1', pools: [{ pool_id: 's', models: ['new-model'], slots: 1, state: 'starting' }] },
    ]);
    const ac = new AbortController();
    const pending = request(`${c.url}/infill`, {
      method: 'POST',
      signal: ac.signal,
      headers: { 'content-type': 'application/json', authorization: `Bearer ${TOKEN}` },
      body: JSON.stringify({ model: 'new-model', input_prefix: 'a', input_suffix: 'b' }),
    }).catch((err: unknown) => err);
    await waitFor(() => c?.t.app.services.tasks.queueDepth().interactive === 1, 5000, 'the infill task queued');
    ac.abort();
    await pending;
    await waitFor(() => c?.t.app.services.tasks.queueDepth().interactive === 0, 5000, 'the task gone with its client');
    // Embeddings and reranking pools report theirs from their config: no wait for those kinds.
    expect((await post('/v1/embeddings', { model: 'new-model', input: 'x' })).status).toBe(400);
  });

  it("errors in each door's shape: 400 naming the field, 404 for an unknown model, 503 with Retry-After when the model's pools are down", async () => {
    c = await startCluster([{ nodeId: 'n1', pools: [EMBED, { ...CODER, state: 'failed' }] }]);
    const dims = await post('/v1/embeddings', { model: 'embedder', input: 'x', dimensions: 8 });
    expect(dims.json.error).toMatchObject({ param: 'dimensions', code: 'invalid_value' });
    expect((await post('/v1/embeddings', { model: 'embedder', input: [] })).json.error).toMatchObject({
      param: 'input',
    });
    expect((await post('/v1/embeddings', { model: 'embedder' })).json.error).toMatchObject({ param: 'input' });
    expect(
      (await post('/v1/rerank', { model: 'embedder', query: 'q', documents: ['a'], texts: ['b'] })).json.error,
    ).toMatchObject({ param: 'documents' });
    const missing = await post('/infill', { model: 'coder', input_prefix: 'a' });
    expect(missing.json).toEqual({
      error: { code: 400, message: expect.stringContaining('input_suffix'), type: 'invalid_request_error' },
    });
    const unknown = await post('/rerank', { model: 'nope', query: 'q', documents: ['a'] });
    expect(unknown.status).toBe(404);
    expect(unknown.json).toEqual({
      error: { code: 404, message: expect.stringContaining("model 'nope' not found"), type: 'not_found_error' },
    });
    const down = await post('/infill', { model: 'coder', input_prefix: 'a', input_suffix: 'b' });
    expect(down.status).toBe(503);
    expect(down.json.error).toMatchObject({ code: 503, type: 'unavailable_error' });
    expect(Number(down.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    const noInfill = await post('/infill', { input_prefix: 'a', input_suffix: 'b' });
    expect(noInfill.json.error).toMatchObject({ code: 400, message: expect.stringContaining('model') });
    expect(c.nodes[0]!.dispatches).toHaveLength(0);
  });
});
