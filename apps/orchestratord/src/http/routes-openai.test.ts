// The /v1 door driven by the official `openai` npm client against a listening orchestratord, with
// fixture pool-managerd nodes behind it (the real-engine path is test-harness/e2e-haiku's).
import OpenAI from 'openai';
import { afterEach, describe, expect, it } from 'vitest';
import { startCluster as startTestCluster, type Cluster } from '../testing/openai-cluster.js';
import { STORE_KINDS, storeHarness } from '../testing/store-harness.js';
import { storeOf, waitFor } from '../testing/test-helpers.js';

const POOL = { pool_id: 'p', models: ['synthetic:llama'], aliases: ['tiny-chat'], slots: 2, engine_version: 'b1-test' };

// Against both cluster stores: with Redis the queue, task records and sessions are the cluster's.
describe.each(STORE_KINDS)('/v1 through the openai client (%s store)', (kind) => {
  const stores = storeHarness(kind);
  const startCluster = (nodes: Parameters<typeof startTestCluster>[0], over: Record<string, unknown> = {}) =>
    startTestCluster(nodes, over, storeOf(kind, stores));
  let c: Cluster | undefined;
  afterEach(async () => {
    await c?.close();
    c = undefined;
  });

  it('models.list and models.retrieve: ready and provisioning pools, by alias or ref; unknown → 404 model_not_found', async () => {
    c = await startCluster([
      {
        nodeId: 'n1',
        pools: [
          POOL,
          { pool_id: 'q', models: ['hf:org/repo/other.gguf'], slots: 1, state: 'provisioning' },
          { pool_id: 'r', models: ['broken'], slots: 1, state: 'failed' },
        ],
      },
    ]);
    const before = Math.floor(Date.now() / 1000);
    const list = [];
    for await (const m of c.client.models.list()) list.push(m);
    expect(list.map((m) => m.id)).toEqual(['hf:org/repo/other.gguf', 'tiny-chat']);
    for (const m of list) {
      expect(m).toMatchObject({ object: 'model', owned_by: 'llama-orch' });
      expect(Number.isInteger(m.created) && m.created <= before + 1 && m.created > before - 60).toBe(true);
    }
    expect(await c.client.models.retrieve('tiny-chat')).toMatchObject({
      id: 'tiny-chat',
      object: 'model',
      owned_by: 'llama-orch',
    });
    expect(await c.client.models.retrieve('synthetic:llama')).toMatchObject({ id: 'synthetic:llama', object: 'model' });
    // Slashes in an id (the client encodes them as %2F).
    expect((await c.client.models.retrieve('hf:org/repo/other.gguf')).id).toBe('hf:org/repo/other.gguf');
    const err = await c.client.models.retrieve('nope').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.NotFoundError);
    expect((err as InstanceType<typeof OpenAI.NotFoundError>).error).toMatchObject({
      code: 'model_not_found',
      param: 'model',
      type: 'not_found_error',
    });
    // A failed pool's model is not offered.
    expect(await c.client.models.retrieve('broken').catch((e: unknown) => e)).toBeInstanceOf(OpenAI.NotFoundError);
  });

  it('chat.completions.create, not streaming: one body with message, finish_reason and usage; the dispatch is a chat with the sampling forwarded', async () => {
    c = await startCluster([{ nodeId: 'n1', pools: [POOL], tokenIntervalMs: 5 }], { default_deadline_ms: 45_000 });
    // top_k and min_p are llama.cpp's, not in the client's types: sent as extra body fields.
    const body: OpenAI.ChatCompletionCreateParamsNonStreaming & { top_k: number; min_p: number } = {
      model: 'tiny-chat',
      messages: [
        { role: 'system', content: 'be brief' },
        { role: 'user', content: 'write a haiku' },
      ],
      max_completion_tokens: 3,
      temperature: 0.2,
      top_p: 0.9,
      top_k: 40,
      min_p: 0.05,
      stop: ['\n\n'],
      seed: 42,
      presence_penalty: 0.1,
      frequency_penalty: 0.2,
      logit_bias: { 15: -100 },
      response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'object' } } },
    };
    const res = await c.client.chat.completions.create(body);
    expect(res).toMatchObject({
      object: 'chat.completion',
      model: 'tiny-chat',
      system_fingerprint: 'b1-test',
      // The engine's own non-streamed body (here the fixture's), passed through: no logprobs asked, none sent.
      choices: [{ index: 0, message: { role: 'assistant', content: 'tok0 tok1 tok2 ' }, finish_reason: 'length' }],
      usage: { prompt_tokens: 7, completion_tokens: 3, total_tokens: 10, prompt_tokens_details: { cached_tokens: 0 } },
    });
    expect(res.id).toMatch(/^chatcmpl-[0-9a-f-]{36}$/);
    expect(Math.abs(res.created - Date.now() / 1000)).toBeLessThan(60);
    const d = c.nodes[0]?.dispatches[0]?.body;
    expect(d).toMatchObject({
      task_id: res.id.slice('chatcmpl-'.length),
      workload: 'chat',
      max_tokens: 3,
      seed: 42,
      greedy: false,
      cache_prompt: true,
      stream: false,
      messages: [
        { role: 'system', content: 'be brief' },
        { role: 'user', content: 'write a haiku' },
      ],
      sampling: {
        temperature: 0.2,
        top_p: 0.9,
        top_k: 40,
        min_p: 0.05,
        stop: ['\n\n'],
        presence_penalty: 0.1,
        frequency_penalty: 0.2,
        logit_bias: { 15: -100 },
        response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'object' } } },
      },
    });
    expect(d?.prompt).toBeUndefined();
    // The task's lines carry the request's correlation id, the task id and the door.
    const lines = c.t.logs.records().filter((r) => r.task_id === d?.task_id);
    expect(lines.map((r) => r.msg)).toEqual(expect.arrayContaining(['task admitted', 'task placed', 'task ended']));
    for (const l of lines) expect(l).toMatchObject({ door: 'v1', correlation_id: expect.any(String) });
    // The configured default deadline, less the time spent before dispatch.
    expect(d?.deadline_ms).toBeGreaterThan(44_000);
    expect(d?.deadline_ms).toBeLessThanOrEqual(45_000);
  });

  it('chat.completions.create streaming with include_usage: role chunk, content chunks, finish chunk, usage chunk, [DONE]', async () => {
    c = await startCluster([{ nodeId: 'n1', pools: [POOL], tokenIntervalMs: 5 }]);
    const stream = await c.client.chat.completions.create({
      model: 'tiny-chat',
      messages: [{ role: 'user', content: 'hi there' }],
      max_tokens: 3,
      stream: true,
      stream_options: { include_usage: true },
    });
    const chunks = [];
    for await (const chunk of stream) chunks.push(chunk);
    const id = chunks[0]?.id ?? '';
    expect(id).toMatch(/^chatcmpl-/);
    for (const ch of chunks)
      expect(ch).toMatchObject({
        id,
        object: 'chat.completion.chunk',
        model: 'tiny-chat',
        system_fingerprint: 'b1-test',
        created: chunks[0]?.created,
      });
    expect(chunks.map((ch) => ch.choices)).toEqual([
      [{ index: 0, delta: { role: 'assistant', content: null }, finish_reason: null }],
      [{ index: 0, delta: { content: 'tok0 ' }, finish_reason: null }],
      [{ index: 0, delta: { content: 'tok1 ' }, finish_reason: null }],
      [{ index: 0, delta: { content: 'tok2 ' }, finish_reason: null }],
      [{ index: 0, delta: {}, finish_reason: 'length' }],
      [],
    ]);
    expect(chunks.at(-1)?.usage).toEqual({
      prompt_tokens: 3,
      completion_tokens: 3,
      total_tokens: 6,
      prompt_tokens_details: { cached_tokens: 0 },
    });
    expect(chunks.slice(0, -1).every((ch) => ch.usage === undefined)).toBe(true);
  });

  it('the raw stream ends with data: [DONE]; without include_usage there is no usage chunk', async () => {
    c = await startCluster([{ nodeId: 'n1', pools: [POOL], tokenIntervalMs: 5 }]);
    const res = await fetch(`${c.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { ...c.t.auth, 'content-type': 'application/json', 'x-correlation-id': 'v1-corr' },
      body: JSON.stringify({
        model: 'tiny-chat',
        messages: [{ role: 'user', content: 'x' }],
        max_tokens: 2,
        stream: true,
      }),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    expect(res.headers.get('x-correlation-id')).toBe('v1-corr');
    const events = (await res.text()).split('\n\n').filter((e) => e !== '');
    expect(events.at(-1)).toBe('data: [DONE]');
    expect(events).toHaveLength(5); // role, 2 content, finish, [DONE]
    expect(events.every((e) => e.startsWith('data: '))).toBe(true);
  });

  it('completions.create, streaming and not: text_completion objects with finish_reason and usage', async () => {
    c = await startCluster([{ nodeId: 'n1', pools: [POOL], tokenIntervalMs: 5 }]);
    const res = await c.client.completions.create({
      model: 'synthetic:llama',
      prompt: 'Once upon a time',
      max_tokens: 2,
      temperature: 0,
    });
    expect(res).toMatchObject({
      object: 'text_completion',
      model: 'synthetic:llama',
      system_fingerprint: 'b1-test',
      choices: [{ index: 0, text: 'tok0 tok1 ', finish_reason: 'length', logprobs: null }],
      usage: { prompt_tokens: 4, completion_tokens: 2, total_tokens: 6 },
    });
    expect(res.id).toMatch(/^cmpl-/);
    expect(c.nodes[0]?.dispatches[0]?.body).toMatchObject({
      workload: 'completion',
      prompt: 'Once upon a time',
      max_tokens: 2,
      sampling: { temperature: 0 },
    });

    const stream = await c.client.completions.create({
      model: 'tiny-chat',
      prompt: ['Once upon a time'],
      max_tokens: 2,
      stream: true,
      stream_options: { include_usage: true },
    });
    const chunks = [];
    for await (const chunk of stream) chunks.push(chunk);
    expect(chunks.map((ch) => ch.choices)).toEqual([
      [{ index: 0, text: 'tok0 ', logprobs: null, finish_reason: null }],
      [{ index: 0, text: 'tok1 ', logprobs: null, finish_reason: null }],
      [{ index: 0, text: '', logprobs: null, finish_reason: 'length' }],
      [],
    ]);
    // The same prompt again on the same pool: the fixture's prompt cache serves all of it.
    expect(chunks.at(-1)?.usage).toMatchObject({
      prompt_tokens: 4,
      completion_tokens: 2,
      prompt_tokens_details: { cached_tokens: 4 },
    });
    expect(chunks.every((ch) => ch.object === 'text_completion' && ch.id.startsWith('cmpl-'))).toBe(true);
  });

  it('an abort mid-stream cancels the task: the node sees the dispatch aborted and the slot is free again', async () => {
    c = await startCluster([{ nodeId: 'n1', pools: [{ ...POOL, slots: 1 }], tokenIntervalMs: 30 }]);
    const ac = new AbortController();
    const stream = await c.client.chat.completions.create(
      { model: 'tiny-chat', messages: [{ role: 'user', content: 'long' }], max_tokens: 1000, stream: true },
      { signal: ac.signal },
    );
    let id = '';
    let seen = 0;
    const reading = (async () => {
      for await (const chunk of stream) {
        id = chunk.id;
        seen += 1;
        if (seen === 3) ac.abort();
      }
    })();
    // The client ends its iteration quietly on its own abort (or throws an abort error): either way it stops reading.
    await reading.catch(() => undefined);
    expect(seen).toBe(3);
    const taskId = id.slice('chatcmpl-'.length);
    const node = c.nodes[0];
    await waitFor(() => node?.aborts.includes(taskId) === true, 5000, 'the node to see the abort');
    expect(node?.active('p')).toBe(0);
    const events = await fetch(`${c.url}/v2/tasks/${taskId}/events`, { headers: c.t.auth }).then((r) => r.text());
    expect(events).toMatch(/event: end\ndata: \{[^\n]*"canceled":true/);
    // The freed slot serves the next request at once.
    const next = await c.client.chat.completions.create({
      model: 'tiny-chat',
      messages: [{ role: 'user', content: 'x' }],
      max_tokens: 1,
    });
    expect(next.choices[0]?.finish_reason).toBe('length');

    // A non-streaming request that is given up on is cancelled the same way.
    const ac2 = new AbortController();
    const pending = c.client.completions
      .create({ model: 'tiny-chat', prompt: 'long', max_tokens: 1000 }, { signal: ac2.signal })
      .catch((e: unknown) => e);
    await waitFor(() => (node?.dispatches.length ?? 0) === 3 && node?.active('p') === 1, 5000, 'the third dispatch');
    ac2.abort();
    expect(await pending).toBeInstanceOf(Error);
    const third = node?.dispatches[2]?.body.task_id ?? '';
    await waitFor(() => node?.aborts.includes(third) === true, 5000, 'the node to see the second abort');
    expect(node?.active('p')).toBe(0);
  });
});
