// The /v1 door's refusals and failures in OpenAI's error shape, and the request fields that steer
// a task (tools, logprobs, lanes, sessions), through the official `openai` client.
import OpenAI from 'openai';
import { afterEach, describe, expect, it } from 'vitest';
import { nameUuid } from '../sessions/session-ids.js';
import { startCluster, type Cluster } from '../testing/openai-cluster.js';
import { waitFor } from '../testing/test-helpers.js';

const POOL = { pool_id: 'p', models: ['synthetic:llama'], aliases: ['tiny-chat'], slots: 1, engine_version: 'b1-test' };
const user = (content: string) => [{ role: 'user' as const, content }];
type ApiError = InstanceType<typeof OpenAI.APIError>;

describe('/v1 errors and request fields', () => {
  let c: Cluster | undefined;
  afterEach(async () => {
    await c?.close();
    c = undefined;
  });

  async function refusal(p: Promise<unknown>): Promise<ApiError> {
    const err = await p.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(OpenAI.APIError);
    return err as ApiError;
  }

  it('400 names the field (param): out-of-range sampling, n = 2, echo, a missing field, top_logprobs without logprobs; malformed JSON', async () => {
    c = await startCluster([{ nodeId: 'n1', pools: [POOL] }]);
    const cases: [Record<string, unknown>, string][] = [
      [{ temperature: 3 }, 'temperature'],
      [{ n: 2 }, 'n'],
      [{ top_logprobs: 2 }, 'top_logprobs'],
      [{ max_tokens: 0 }, 'max_tokens'],
      [{ stop: [''] }, 'stop.0'],
      [{ response_format: { type: 'xml' } }, 'response_format.type'],
    ];
    for (const [extra, param] of cases) {
      const err = await refusal(
        c.client.chat.completions.create({
          model: 'tiny-chat',
          messages: user('x'),
          ...extra,
        } as OpenAI.ChatCompletionCreateParamsNonStreaming),
      );
      expect(err.status, param).toBe(400);
      expect(err.error, param).toMatchObject({ type: 'invalid_request_error', param, code: 'invalid_value' });
      expect(err.message, param).toContain(param);
    }
    const noMessages = await refusal(
      c.client.chat.completions.create({ model: 'tiny-chat' } as OpenAI.ChatCompletionCreateParamsNonStreaming),
    );
    expect(noMessages.error).toMatchObject({ param: 'messages' });
    const echo = await refusal(c.client.completions.create({ model: 'tiny-chat', prompt: 'x', echo: true }));
    expect(echo.error).toMatchObject({ param: 'echo' });
    const n2 = await refusal(c.client.completions.create({ model: 'tiny-chat', prompt: 'x', n: 2 }));
    expect(n2.error).toMatchObject({ param: 'n', code: 'invalid_value' });
    // Nothing reached a node.
    expect(c.nodes[0]?.dispatches).toHaveLength(0);

    const res = await fetch(`${c.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { ...c.t.auth, 'content-type': 'application/json' },
      body: '{"model":',
    });
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({
      error: { type: 'invalid_request_error', param: null, code: 'invalid_value' },
    });
    const unknown = await fetch(`${c.url}/v1/audio/speech`, {
      method: 'POST',
      headers: { ...c.t.auth, 'content-type': 'application/json' },
      body: '{}',
    });
    expect(unknown.status).toBe(404);
    expect(await unknown.json()).toMatchObject({ error: { type: 'not_found_error', code: 'NOT_FOUND', param: null } });
  });

  it('401 without the right key, in OpenAI shape; 404 model_not_found for a model no pool lists; 503 when its pools cannot serve', async () => {
    c = await startCluster([
      { nodeId: 'n1', pools: [POOL, { pool_id: 'f', models: ['down-model'], slots: 1, state: 'failed' }] },
    ]);
    const wrong = new OpenAI({ baseURL: `${c.url}/v1`, apiKey: 'wrong-key-0123456789', maxRetries: 0 });
    const e401 = await refusal(wrong.chat.completions.create({ model: 'tiny-chat', messages: user('x') }));
    expect(e401).toBeInstanceOf(OpenAI.AuthenticationError);
    expect(e401.error).toMatchObject({ type: 'authentication_error', code: 'UNAUTHORIZED' });
    expect((await refusal(wrong.models.list())).status).toBe(401);

    const e404 = await refusal(
      c.client.chat.completions.create({ model: 'gpt-4o', messages: user('x'), stream: true }),
    );
    expect(e404).toBeInstanceOf(OpenAI.NotFoundError);
    expect(e404.error).toMatchObject({ code: 'model_not_found', param: 'model' });

    const e503 = await refusal(c.client.completions.create({ model: 'down-model', prompt: 'x' }));
    expect(e503.status).toBe(503);
    expect(e503.error).toMatchObject({ type: 'unavailable_error', code: 'MODEL_NOT_AVAILABLE' });
    expect(Number(e503.headers?.get('retry-after'))).toBeGreaterThanOrEqual(1);
  });

  it('429 with Retry-After when the admission queue refuses', async () => {
    c = await startCluster([{ nodeId: 'n1', pools: [POOL] }], { admission_capacity: 1, admission_policy: 'reject' });
    const node = c.nodes[0];
    if (node === undefined) throw new Error('no node');
    node.behaviour = { kind: 'hang' };
    const ac = new AbortController();
    // One runs (hangs on the only slot), one waits in the queue (capacity 1), the third is refused.
    const running = c.client.chat.completions
      .create({ model: 'tiny-chat', messages: user('a') }, { signal: ac.signal })
      .catch(() => undefined);
    await waitFor(() => node.dispatches.length === 1, 5000, 'the first dispatch');
    const queued = c.client.chat.completions
      .create({ model: 'tiny-chat', messages: user('b') }, { signal: ac.signal })
      .catch(() => undefined);
    await waitFor(() => c?.t.app.services.tasks.queueDepth().interactive === 1, 5000, 'a queued task');
    const e429 = await refusal(c.client.chat.completions.create({ model: 'tiny-chat', messages: user('c') }));
    expect(e429).toBeInstanceOf(OpenAI.RateLimitError);
    expect(e429.error).toMatchObject({ type: 'rate_limit_error', code: 'ADMISSION_REJECT' });
    expect(Number(e429.headers?.get('retry-after'))).toBeGreaterThanOrEqual(1);
    ac.abort();
    await Promise.all([running, queued]);
    // Both left: the running one's dispatch was aborted at the node.
    await waitFor(() => node.aborts.length === 1, 5000, 'the node to see the abort');
  });

  it('a failure after the stream started is a last data: {error} event; before it, an HTTP error with the envelope status', async () => {
    c = await startCluster([{ nodeId: 'n1', pools: [POOL], tokenIntervalMs: 5 }]);
    const node = c.nodes[0];
    if (node === undefined) throw new Error('no node');
    node.nextBehaviours.push({ kind: 'error-event', code: 'DECODE_TIMEOUT', retriable: false, afterTokens: 2 });
    const stream = await c.client.chat.completions.create({
      model: 'tiny-chat',
      messages: user('x'),
      max_tokens: 10,
      stream: true,
    });
    const seen: string[] = [];
    const err = await (async () => {
      for await (const chunk of stream) seen.push(chunk.choices[0]?.delta.content ?? '<role>');
    })().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(seen).toEqual(['<role>', 'tok0 ', 'tok1 ']);
    expect(err).toBeInstanceOf(OpenAI.APIError);
    expect((err as ApiError).error).toMatchObject({
      type: 'server_error',
      code: 'DECODE_TIMEOUT',
      message: 'fixture error',
    });

    node.nextBehaviours.push({ kind: 'error-event', code: 'DECODE_TIMEOUT', retriable: false, afterTokens: 0 });
    const early = await refusal(
      c.client.chat.completions.create({ model: 'tiny-chat', messages: user('x'), stream: true }),
    );
    expect(early.status).toBe(500);
    expect(early.error).toMatchObject({ code: 'DECODE_TIMEOUT' });
    node.nextBehaviours.push({ kind: 'error-event', code: 'DECODE_TIMEOUT', retriable: false, afterTokens: 1 });
    const whole = await refusal(c.client.completions.create({ model: 'tiny-chat', prompt: 'x' }));
    expect(whole.status).toBe(500);
  });

  it('a stream kept waiting gets its 200 and keep-alive comments; a failure after that is a data: {error} event', async () => {
    c = await startCluster([{ nodeId: 'n1', pools: [POOL] }], { sse_keepalive_ms: 50 });
    const node = c.nodes[0];
    if (node === undefined) throw new Error('no node');
    node.behaviour = { kind: 'hang' };
    const res = await fetch(`${c.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { ...c.t.auth, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'tiny-chat', messages: user('x'), stream: true }),
    });
    // Headers came while the node still had not sent a token.
    expect(res.status).toBe(200);
    expect(node.dispatches).toHaveLength(1);
    const taskId = node.dispatches[0]?.body.task_id ?? '';
    const reading = res.text();
    await new Promise((r) => setTimeout(r, 150));
    // Ended from the side (an operator's cancel): the client gets its end, OpenAI-style.
    const cancel = await fetch(`${c.url}/v2/tasks/${taskId}/cancel`, { method: 'POST', headers: c.t.auth });
    expect(cancel.status).toBe(204);
    const text = await reading;
    expect(text.match(/^: keep-alive$/gm)?.length ?? 0).toBeGreaterThanOrEqual(2);
    const events = text.split('\n\n').filter((e) => e.startsWith('data: '));
    expect(events.at(-1)).toBe('data: [DONE]');
    expect(JSON.parse(events.at(-2)?.slice(6) ?? '{}')).toMatchObject({
      choices: [{ delta: {}, finish_reason: 'stop' }],
    });

    // The same wait ended by a failure: a last data: {error} event, no [DONE].
    const res2 = await fetch(`${c.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { ...c.t.auth, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'tiny-chat', messages: user('x'), stream: true }),
    });
    expect(res2.status).toBe(200);
    await c.t.app.services.tasks.close(); // shutdown ends every task with a retriable INTERNAL error
    const text2 = await res2.text();
    const last =
      text2
        .split('\n\n')
        .filter((e) => e.startsWith('data: '))
        .at(-1) ?? '';
    expect(JSON.parse(last.slice(6))).toMatchObject({ error: { type: 'server_error', code: 'INTERNAL' } });
  });

  it('tool calls: delta.tool_calls chunks when streaming, merged into message.tool_calls when not; finish_reason tool_calls', async () => {
    c = await startCluster([{ nodeId: 'n1', pools: [POOL] }]);
    const node = c.nodes[0];
    if (node === undefined) throw new Error('no node');
    const tools: OpenAI.ChatCompletionTool[] = [
      {
        type: 'function',
        function: { name: 'get_time', parameters: { type: 'object', properties: { tz: { type: 'string' } } } },
      },
    ];
    node.behaviour = { kind: 'tool-call' };
    const res = await c.client.chat.completions.create({
      model: 'tiny-chat',
      messages: user('time?'),
      tools,
      tool_choice: 'auto',
    });
    expect(res.choices[0]).toMatchObject({
      finish_reason: 'tool_calls',
      message: {
        role: 'assistant',
        content: null,
        tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_time', arguments: '{"tz":"UTC"}' } }],
      },
    });
    expect(node.dispatches[0]?.body.sampling).toMatchObject({ tools, tool_choice: 'auto' });
    const stream = await c.client.chat.completions.create({
      model: 'tiny-chat',
      messages: user('time?'),
      tools,
      stream: true,
    });
    const deltas = [];
    for await (const chunk of stream) deltas.push(chunk.choices[0]);
    expect(deltas.map((d) => d?.delta.tool_calls?.[0]?.function?.arguments)).toEqual([
      undefined,
      '',
      '{"tz":"UTC"}',
      undefined,
    ]);
    expect(deltas.at(-1)?.finish_reason).toBe('tool_calls');
  });

  it('logprobs ride on the chunks and the body', async () => {
    c = await startCluster([{ nodeId: 'n1', pools: [POOL], tokenIntervalMs: 5 }]);
    const res = await c.client.chat.completions.create({
      model: 'tiny-chat',
      messages: user('x'),
      max_tokens: 2,
      logprobs: true,
      top_logprobs: 0,
    });
    expect(res.choices[0]?.logprobs?.content?.map((l) => l.token)).toEqual(['tok0 ', 'tok1 ']);
    const stream = await c.client.chat.completions.create({
      model: 'tiny-chat',
      messages: user('x'),
      max_tokens: 2,
      logprobs: true,
      stream: true,
    });
    const lp = [];
    for await (const chunk of stream) lp.push(chunk.choices[0]?.logprobs?.content?.[0]?.logprob);
    expect(lp).toEqual([undefined, -0.5, -0.5, undefined]);
  });

  it('lanes and sessions: service_tier flex and priority batch queue as batch; user and X-Session-Id key a session', async () => {
    c = await startCluster([{ nodeId: 'n1', pools: [POOL], tokenIntervalMs: 2 }]);
    await c.client.chat.completions.create({
      model: 'tiny-chat',
      messages: user('x'),
      max_tokens: 1,
      service_tier: 'flex',
    });
    await c.client.chat.completions.create({
      model: 'tiny-chat',
      messages: user('x'),
      max_tokens: 1,
      priority: 'batch',
    } as OpenAI.ChatCompletionCreateParamsNonStreaming);
    await c.client.chat.completions.create({ model: 'tiny-chat', messages: user('x'), max_tokens: 1, user: 'alice' });
    await c.client.completions.create({ model: 'tiny-chat', prompt: 'x', max_tokens: 1, user: 'alice' });
    const sid = '6f1c1a5e-8d4b-4c2e-9a61-0b7c2d3e4f50';
    await c.client.chat.completions.create(
      { model: 'tiny-chat', messages: user('x'), max_tokens: 2 },
      { headers: { 'X-Session-Id': sid } },
    );
    const metrics = await fetch(`${c.url}/metrics`).then((r) => r.text());
    expect(metrics).toMatch(/llorch_tasks_enqueued_total\{engine="llamacpp",priority="batch"\} 2/);
    expect(metrics).toMatch(/llorch_tasks_enqueued_total\{engine="llamacpp",priority="interactive"\} 3/);
    const session = await fetch(`${c.url}/v2/sessions/${sid}`, { headers: c.t.auth }).then((r) => r.json());
    expect(session).toMatchObject({ session_id: sid, turns: 1, tokens_out: 2 });
    // Both of alice's requests counted in one session, whose id is a stable hash of the user.
    const alice = await fetch(`${c.url}/v2/sessions/${nameUuid('user:alice')}`, { headers: c.t.auth }).then((r) =>
      r.json(),
    );
    expect(alice).toMatchObject({ turns: 2, tokens_out: 2 });
    expect(c.t.app.services.sessions.size).toBe(4); // two one-turn sessions (flex, batch), alice's, the header's
  });
});
