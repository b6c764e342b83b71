// The easier /v2: documented defaults for everything but the model and the input, chat tasks,
// sampling and the prompt cache in the dispatch, and the event stream in the admission response.
import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { startCluster, type Cluster } from '../testing/openai-cluster.js';
import { frames, waitFor } from '../testing/test-helpers.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

describe('POST /v2/tasks, the easier way', () => {
  let c: Cluster | undefined;
  afterEach(async () => {
    await c?.close();
    c = undefined;
  });

  async function post(cl: Cluster, body: unknown, headers: Record<string, string> = {}) {
    return request(`${cl.url}/v2/tasks`, {
      method: 'POST',
      headers: { ...cl.t.auth, 'content-type': 'application/json', ...headers },
      body: JSON.stringify(body),
    });
  }

  it('a model and a prompt are enough: ids, workload, engine, ctx, priority, max_tokens and the deadline take their defaults', async () => {
    c = await startCluster(
      [{ nodeId: 'n1', pools: [{ pool_id: 'p', models: ['m'], aliases: ['nice'], slots: 1 }], tokenIntervalMs: 50 }],
      { default_deadline_ms: 30_000 },
    );
    const res = await post(c, { model_ref: 'nice', prompt: 'hello' });
    const body = (await res.body.json()) as { task_id: string };
    expect(res.statusCode).toBe(202);
    expect(body.task_id).toMatch(UUID);
    const node = c.nodes[0];
    await waitFor(() => node?.dispatches.length === 1, 5000, 'the dispatch');
    const d = node?.dispatches[0]?.body;
    expect(d).toMatchObject({
      task_id: body.task_id,
      workload: 'completion',
      prompt: 'hello',
      max_tokens: 1024,
      greedy: false,
      cache_prompt: true,
    });
    expect(d?.deadline_ms).toBeGreaterThan(29_000);
    expect(d?.deadline_ms).toBeLessThanOrEqual(30_000);
    expect(d?.sampling).toBeUndefined();
    // The alias was resolved to the pool's model ref: the task is queued and logged under it.
    const admitted = c.t.logs.records().find((r) => r.msg === 'task admitted' && r.task_id === body.task_id);
    expect(admitted).toMatchObject({ model_ref: 'm', priority: 'interactive' });
    const cancel = await request(`${c.url}/v2/tasks/${body.task_id}/cancel`, { method: 'POST', headers: c.t.auth });
    expect(cancel.statusCode).toBe(204);
  });

  it('workload chat sends the messages; sampling is forwarded; strict determinism (and kv_hint cold) turn the prompt cache off, strict samples greedily', async () => {
    c = await startCluster([
      { nodeId: 'n1', pools: [{ pool_id: 'p', models: ['m'], slots: 1, deterministic: true }], tokenIntervalMs: 2 },
    ]);
    const messages = [{ role: 'user', content: 'hi' }];
    const sampling = { temperature: 0.7, top_k: 20, stop: 'END', response_format: { type: 'json_object' } };
    const chat = await post(c, { model_ref: 'm', workload: 'chat', messages, sampling, max_tokens: 2, seed: 3 });
    expect(chat.statusCode).toBe(202);
    await chat.body.dump();
    const strict = await post(c, { model_ref: 'm', prompt: 'x', max_tokens: 2, determinism: 'strict', seed: 3 });
    expect(strict.statusCode).toBe(202);
    await strict.body.dump();
    const cold = await post(c, { model_ref: 'm', prompt: 'x', max_tokens: 2, kv_hint: 'cold' });
    expect(cold.statusCode).toBe(202);
    await cold.body.dump();
    const node = c.nodes[0];
    await waitFor(() => node?.completed.length === 3, 5000, 'all three tasks');
    expect(node?.dispatches[2]?.body).toMatchObject({ cache_prompt: false, greedy: false });
    expect(node?.dispatches[0]?.body).toMatchObject({
      workload: 'chat',
      messages,
      sampling,
      seed: 3,
      cache_prompt: true,
      greedy: false,
    });
    expect(node?.dispatches[0]?.body.prompt).toBeUndefined();
    expect(node?.dispatches[1]?.body).toMatchObject({
      workload: 'completion',
      prompt: 'x',
      cache_prompt: false,
      greedy: true,
    });
  });

  it('refuses a chat without messages, a prompt on a chat, messages on a completion, and bad sampling, naming the field', async () => {
    c = await startCluster([{ nodeId: 'n1', pools: [{ pool_id: 'p', models: ['m'], slots: 1 }] }]);
    const cases: [Record<string, unknown>, string][] = [
      [{ model_ref: 'm', workload: 'chat' }, 'messages'],
      [{ model_ref: 'm', workload: 'chat', messages: [{ role: 'user', content: 'x' }], prompt: 'x' }, 'prompt'],
      [{ model_ref: 'm', prompt: 'x', messages: [{ role: 'user', content: 'x' }] }, 'messages'],
      [{ model_ref: 'm' }, 'prompt'],
      [{ model_ref: 'm', prompt: 'x', sampling: { temperature: 9 } }, 'sampling.temperature'],
      [{ model_ref: 'm', prompt: 'x', sampling: { top_logprobs: 2 } }, 'sampling.top_logprobs'],
    ];
    for (const [body, field] of cases) {
      const res = await post(c, body);
      const json = (await res.body.json()) as { code: string; message: string };
      expect(res.statusCode, field).toBe(400);
      expect(json.code).toBe('INVALID_PARAMS');
      expect(json.message, field).toContain(`${field}:`);
    }
  });

  it("Accept: text/event-stream answers with the task's event stream: the same frames GET …/events gives, end with prompt and cached tokens", async () => {
    c = await startCluster([
      { nodeId: 'n1', pools: [{ pool_id: 'p', models: ['m'], slots: 1, engine_version: 'b1-x' }], tokenIntervalMs: 5 },
    ]);
    const task_id = '11111111-2222-4333-8444-555555555555';
    const res = await post(
      c,
      { task_id, model_ref: 'm', prompt: 'one two three', max_tokens: 3 },
      { accept: 'text/event-stream', 'x-correlation-id': 'v2-sse' },
    );
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/event-stream/);
    expect(res.headers['x-correlation-id']).toBe('v2-sse');
    const text = await res.body.text();
    const got = frames(text);
    expect(got.map((f) => f.event).filter((e) => e !== 'metrics')).toEqual([
      'started',
      'token',
      'token',
      'token',
      'end',
    ]);
    expect(got.map((f) => f.id)).toEqual(got.map((_, i) => i));
    expect(got.at(-1)?.data).toEqual({
      tokens_out: 3,
      decode_ms: expect.any(Number),
      decode_time_ms: expect.any(Number),
      pool_id: 'p',
      node_id: 'n1',
      engine_version: 'b1-x',
      stop_type: 'limit',
      finish_reason: 'length',
      prompt_tokens: 3,
      cached_tokens: 0,
    });
    const again = await request(`${c.url}/v2/tasks/${task_id}/events`, { headers: c.t.auth });
    expect(await again.body.text()).toBe(text);
  });

  it('leaving the stream of the admission response cancels the task (the node sees the abort)', async () => {
    c = await startCluster([{ nodeId: 'n1', pools: [{ pool_id: 'p', models: ['m'], slots: 1 }], tokenIntervalMs: 30 }]);
    const ac = new AbortController();
    const task_id = '21111111-2222-4333-8444-555555555555';
    const res = await request(`${c.url}/v2/tasks`, {
      method: 'POST',
      signal: ac.signal,
      headers: { ...c.t.auth, 'content-type': 'application/json', accept: 'text/event-stream' },
      body: JSON.stringify({ task_id, model_ref: 'm', prompt: 'x', max_tokens: 500 }),
    });
    expect(res.statusCode).toBe(200);
    const reading = (async () => {
      let seen = '';
      for await (const chunk of res.body) {
        seen += (chunk as Buffer).toString();
        if (seen.includes('event: token')) ac.abort();
      }
    })().catch(() => undefined);
    await reading;
    const node = c.nodes[0];
    await waitFor(() => node?.aborts.includes(task_id) === true, 5000, 'the abort at the node');
    const events = await request(`${c.url}/v2/tasks/${task_id}/events`, { headers: c.t.auth }).then((r) =>
      r.body.text(),
    );
    expect(events).toMatch(/event: end\ndata: \{[^\n]*"canceled":true/);
  });
});
