import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pino } from 'pino';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HandoffFileSchema, type ChatMessage, type DispatchEvent } from '@llama-orch/contracts';
import { parseSseData, toChatBody } from '@llama-orch/llamacpp-adapter';
import { NodeClient } from '../node/node-client.js';
import { BackoffPolicy } from '../supervision/backoff.js';
import { FakeOrchestrator } from '../testing/fake-orchestrator.js';
import { collect, dispatch, report, startHarness, textOf, until, waitReady, type Harness } from '../testing/harness.js';

// One pool-managerd (in-process) with one real llama-server pool over the synthetic model, whose
// GGUF carries a chat template the engine renders. One slot, so a conversation's second turn meets
// the first turn's prompt in the slot's cache. Aliases configured as an operator would.
let h: Harness;

beforeAll(async () => {
  h = await startHarness({
    pools: [
      {
        id: 'chat',
        model: 'synthetic:llama?ctx=4096',
        aliases: ['synthetic', 'tiny-chat'],
        ctx: 4096,
        slots: 1,
        threads: 1,
      },
    ],
    supervision: { stopTimeoutMs: 3000 },
  });
  await waitReady(h, 'chat');
}, 45 * 60_000);

afterAll(async () => {
  await h?.close();
});

function engineUrl(): string {
  return HandoffFileSchema.parse(JSON.parse(readFileSync(join(h.runtime.engines, 'chat-r0.json'), 'utf8'))).url;
}

/** The same request straight to the engine's /v1/chat/completions: concatenated `delta.content`. */
async function directChat(body: object): Promise<string> {
  const res = await request(`${engineUrl()}/v1/chat/completions`, {
    method: 'POST',
    body: JSON.stringify(body),
    headers: { 'content-type': 'application/json' },
    reset: true,
  });
  expect(res.statusCode).toBe(200);
  let out = '';
  for await (const payload of parseSseData(res.body)) {
    if (payload === '[DONE]') break;
    out +=
      (JSON.parse(payload) as { choices: { delta?: { content?: string | null } }[] }).choices[0]?.delta?.content ?? '';
  }
  return out;
}

function endOf(events: DispatchEvent[]): Extract<DispatchEvent, { type: 'end' }> {
  const end = events.at(-1);
  if (end?.type !== 'end') throw new Error(`stream did not end with an end event: ${JSON.stringify(end)}`);
  return end;
}

const conversation: ChatMessage[] = [
  { role: 'system', content: 'You are a terse assistant.' },
  { role: 'user', content: 'Write one line about the sea at dawn.' },
];
const answerSchema = {
  type: 'object',
  properties: { answer: { type: 'string', enum: ['yes', 'no'] } },
  required: ['answer'],
  additionalProperties: false,
};

describe('chat dispatch through pool-managerd to the real llama-server', () => {
  it('streams the same content as the same request sent straight to the engine (seed 42, temperature 0)', async () => {
    const req = { workload: 'chat', messages: conversation, max_tokens: 24, seed: 42, greedy: true };
    const d = await dispatch(h, 'chat', req);
    expect(d.status).toBe(200);
    const events = await collect(d.events);
    const end = endOf(events);
    expect(end).toMatchObject({
      tokens_out: 24,
      stop_type: 'limit',
      finish_reason: 'length',
      cached_tokens: 0,
      pool_id: 'chat',
      node_id: 'test-node',
    });
    expect(end.prompt_tokens).toBeGreaterThan(15);
    const tokens = events.slice(0, -1);
    expect(tokens.every((e) => e.type === 'token')).toBe(true);
    expect(tokens.map((e) => (e.type === 'token' ? e.i : -1))).toEqual(tokens.map((_, i) => i));
    const text = textOf(events);
    expect(text.length).toBeGreaterThan(0);
    expect(await directChat(toChatBody({ messages: conversation, max_tokens: 24, seed: 42, greedy: true }))).toBe(text);
    // The dispatch lines carry the workload; the end line the engine's prompt counts.
    expect(h.logs.some((l) => l.msg === 'dispatch started' && l.workload === 'chat')).toBe(true);
    expect(
      h.logs.some(
        (l) => l.msg === 'dispatch ended' && l.finish_reason === 'length' && l.prompt_tokens === end.prompt_tokens,
      ),
    ).toBe(true);
  });

  it('stop is honoured: the content ends before the first stop string, finish_reason stop', async () => {
    const base = { workload: 'chat', messages: conversation, max_tokens: 24, seed: 42, greedy: true };
    const full = textOf(await collect((await dispatch(h, 'chat', base)).events));
    const stop = full.slice(4, 6);
    const events = await collect((await dispatch(h, 'chat', { ...base, sampling: { stop: [stop] } })).events);
    expect(textOf(events)).toBe(full.slice(0, full.indexOf(stop)));
    expect(endOf(events)).toMatchObject({ finish_reason: 'stop', stop_type: 'eos' });
    // A completion honours stop too (stop_type word).
    const prompt = 'Once upon a time, in a land far away,';
    const whole = textOf(await collect((await dispatch(h, 'chat', { prompt, max_tokens: 24, greedy: true })).events));
    const word = whole.slice(4, 6);
    const cut = await collect(
      (await dispatch(h, 'chat', { prompt, max_tokens: 24, greedy: true, sampling: { stop: word } })).events,
    );
    expect(textOf(cut)).toBe(whole.slice(0, whole.indexOf(word)));
    expect(endOf(cut)).toMatchObject({ finish_reason: 'stop', stop_type: 'word' });
  });

  it('response_format json_schema: the output parses and matches the schema (chat and completion)', async () => {
    const response_format = { type: 'json_schema', json_schema: { name: 'answer', schema: answerSchema } };
    const chat = await collect(
      (
        await dispatch(h, 'chat', {
          workload: 'chat',
          messages: conversation,
          max_tokens: 200,
          greedy: true,
          sampling: { response_format },
        })
      ).events,
    );
    expect(endOf(chat).finish_reason).toBe('stop');
    expect(JSON.parse(textOf(chat))).toEqual({ answer: expect.stringMatching(/^(yes|no)$/) as unknown });
    const completion = await collect(
      (await dispatch(h, 'chat', { prompt: 'Answer:', max_tokens: 200, greedy: true, sampling: { response_format } }))
        .events,
    );
    expect(JSON.parse(textOf(completion))).toEqual({ answer: expect.stringMatching(/^(yes|no)$/) as unknown });
  });

  it('a second chat turn extending the first with cache_prompt reports cached tokens', async () => {
    const turn1 = await collect(
      (
        await dispatch(h, 'chat', {
          workload: 'chat',
          messages: conversation,
          max_tokens: 16,
          seed: 3,
          greedy: true,
          cache_prompt: true,
        })
      ).events,
    );
    const end1 = endOf(turn1);
    const messages: ChatMessage[] = [
      ...conversation,
      { role: 'assistant', content: textOf(turn1) },
      { role: 'user', content: 'Now one about the sea at dusk.' },
    ];
    const end2 = endOf(
      await collect(
        (
          await dispatch(h, 'chat', {
            workload: 'chat',
            messages,
            max_tokens: 8,
            seed: 3,
            greedy: true,
            cache_prompt: true,
          })
        ).events,
      ),
    );
    report(
      `chat turn 2 through pool-managerd: ${end2.cached_tokens}/${end2.prompt_tokens} prompt tokens from the engine cache (turn 1 prompt: ${end1.prompt_tokens})`,
    );
    expect(end2.cached_tokens).toBeGreaterThan(0);
    expect(end2.cached_tokens).toBeGreaterThanOrEqual((end1.prompt_tokens ?? 0) - 1);
    // cache_prompt false (the default) evaluates the whole prompt again.
    const cold = endOf(
      await collect(
        (await dispatch(h, 'chat', { workload: 'chat', messages, max_tokens: 8, seed: 3, greedy: true })).events,
      ),
    );
    expect(cold.cached_tokens).toBe(0);
    const metrics = await (await request(`${h.url}/metrics`)).body.text();
    expect(metrics).toMatch(/llorch_dispatch_prompt_tokens_cached_total\{pool_id="chat"\} [1-9]/);
  });

  it('an engine 400 before the first token is a non-retriable INVALID_PARAMS event with the engine message', async () => {
    // Valid at the door (any object is a schema), refused by the engine's schema converter.
    const schema = { type: 'object', properties: { a: { $ref: '#/definitions/missing' } } };
    for (const body of [
      {
        workload: 'chat',
        messages: conversation,
        max_tokens: 4,
        sampling: { response_format: { type: 'json_schema', json_schema: { schema } } },
      },
      { prompt: 'x', max_tokens: 4, sampling: { response_format: { type: 'json_schema', json_schema: { schema } } } },
      { workload: 'chat', messages: [{ role: 'user', content: 'word '.repeat(6000) }], max_tokens: 4 },
    ]) {
      const d = await dispatch(h, 'chat', body);
      expect(d.status).toBe(200);
      const events = await collect(d.events);
      expect(events).toHaveLength(1);
      expect(events[0]).toMatchObject({ type: 'error', code: 'INVALID_PARAMS', retriable: false });
      expect((events[0] as { message: string }).message).toMatch(/cannot resolve \$ref|context size/);
    }
    await until(() => h.manager.pools.activeLeases('chat') === 0, 'leases released', 2000);
    // The pool stays ready: a refused request is no engine fault.
    expect(
      endOf(
        await collect((await dispatch(h, 'chat', { workload: 'chat', messages: conversation, max_tokens: 2 })).events),
      ).tokens_out,
    ).toBe(2);
    expect(h.manager.pools.status('chat')).toMatchObject({ ready: true, restarts: 0 });
  });

  it('a chat without messages is refused at the door (400 naming the field)', async () => {
    const d = await dispatch(h, 'chat', { workload: 'chat', prompt: 'x', max_tokens: 4 });
    expect(d.status).toBe(400);
    expect(JSON.stringify(d.json)).toMatch(/messages/);
  });

  it('aliases appear in the snapshots sent to orchestratord (register and heartbeat)', async () => {
    const orch = new FakeOrchestrator('t0ken-for-the-fake-orchestrator-0123');
    await orch.listen();
    const client = new NodeClient({
      orchestratorUrl: orch.url,
      nodeId: 'test-node',
      machineId: 'm',
      address: h.url,
      version: '0.0.0',
      capabilities: { gpus: [], cpu_cores: 2, ram_total_bytes: 1024 },
      apiToken: 't0ken-for-the-fake-orchestrator-0123',
      heartbeatIntervalMs: 50,
      snapshots: () => h.manager.pools.snapshots(),
      logger: pino({ level: 'silent' }),
      backoff: new BackoffPolicy({ baseMs: 20, maxMs: 100 }),
    });
    try {
      client.start();
      await until(() => orch.heartbeats.length > 0, 'a heartbeat', 5000);
      expect(orch.registrations[0]?.pools[0]).toMatchObject({
        pool_id: 'chat',
        ready: true,
        aliases: ['synthetic', 'tiny-chat'],
      });
      expect(orch.heartbeats[0]?.body.pools[0]).toMatchObject({ pool_id: 'chat', aliases: ['synthetic', 'tiny-chat'] });
      expect(orch.heartbeats[0]?.body.pools[0]?.models).toEqual(expect.arrayContaining(['synthetic:llama?ctx=4096']));
    } finally {
      await client.close();
      await orch.close();
    }
  });
});
