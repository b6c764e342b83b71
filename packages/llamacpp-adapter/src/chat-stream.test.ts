import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ChatMessage } from '@llama-orch/contracts';
import { toChatBody } from './completion-body.js';
import { CompletionAbortedError, EngineRejectedError } from './errors.js';
import { LlamaServerClient, type CompletionEvent } from './llama-server-client.js';
import { parseSseData } from './testing/sse-parser.js';
import { spawnTestEngine, type TestEngine } from './testing/test-engine.js';
import { chatEvents, completeEvents } from './testing/pull-events.js';

// Real llama-server + the synthetic model, whose GGUF carries a chat template the engine renders.
let engine: TestEngine;
let client: LlamaServerClient;

beforeAll(async () => {
  engine = await spawnTestEngine({ slots: 1, ctx: 4096 });
  client = new LlamaServerClient({ baseUrl: engine.url });
  const deadline = Date.now() + 60_000;
  while ((await client.health()) !== 'ready') {
    if (Date.now() > deadline) throw new Error('llama-server did not become ready');
    await new Promise((r) => setTimeout(r, 10));
  }
}, 45 * 60_000);

afterAll(async () => {
  await client?.close();
  await engine?.stop();
});

async function collect(it: AsyncIterable<CompletionEvent>): Promise<CompletionEvent[]> {
  const out: CompletionEvent[] = [];
  for await (const ev of it) out.push(ev);
  return out;
}

const text = (events: CompletionEvent[]): string => events.flatMap((e) => (e.type === 'token' ? [e.t] : [])).join('');
const endOf = (events: CompletionEvent[]): Extract<CompletionEvent, { type: 'end' }> => {
  const end = events.at(-1);
  if (end?.type !== 'end') throw new Error('no end event');
  return end;
};

/** The same body straight to the engine's /v1/chat/completions: concatenated `delta.content`. */
async function direct(body: object): Promise<string> {
  const res = await request(`${engine.url}/v1/chat/completions`, {
    method: 'POST',
    body: JSON.stringify(body),
    headers: { 'content-type': 'application/json' },
    reset: true,
  });
  expect(res.statusCode).toBe(200);
  let out = '';
  for await (const payload of parseSseData(res.body)) {
    if (payload === '[DONE]') break;
    const chunk = JSON.parse(payload) as { choices: { delta?: { content?: string | null } }[] };
    out += chunk.choices[0]?.delta?.content ?? '';
  }
  return out;
}

const conversation: ChatMessage[] = [
  { role: 'system', content: 'You are a terse assistant.' },
  { role: 'user', content: 'Tell me about the weather on the coast today.' },
];
const answerSchema = {
  type: 'object',
  properties: { answer: { type: 'string', enum: ['yes', 'no'] } },
  required: ['answer'],
  additionalProperties: false,
};

describe('chat stream against the real llama-server', () => {
  it('streams the same content as the same request sent straight to the engine (seed, greedy)', async () => {
    const req = { messages: conversation, max_tokens: 24, seed: 42, greedy: true };
    const events = await collect(chatEvents(client, req));
    const end = endOf(events);
    expect(end).toMatchObject({ tokens_out: 24, stop_type: 'limit', finish_reason: 'length', cached_tokens: 0 });
    expect(end.decode_ms).toBeGreaterThan(0);
    // "System: …\nUser: …\nAssistant:" with BOS: more tokens than the two messages' words.
    expect(end.prompt_tokens).toBeGreaterThan(15);
    const tokens = events.filter((e) => e.type === 'token');
    expect(tokens.map((e) => e.i)).toEqual(tokens.map((_, i) => i));
    expect(text(events).length).toBeGreaterThan(0);
    expect(await direct(toChatBody(req))).toBe(text(events));
  });

  it('honours stop: the content ends before the first stop string', async () => {
    const base = { messages: conversation, max_tokens: 24, seed: 42, greedy: true };
    const full = text(await collect(chatEvents(client, base)));
    const stop = full.slice(4, 6);
    expect(stop.length).toBe(2);
    const events = await collect(chatEvents(client, { ...base, sampling: { stop } }));
    expect(text(events)).toBe(full.slice(0, full.indexOf(stop)));
    expect(endOf(events)).toMatchObject({ finish_reason: 'stop', stop_type: 'eos' });
  });

  it('response_format json_schema: the content parses and matches the schema', async () => {
    const events = await collect(
      chatEvents(client, {
        messages: conversation,
        max_tokens: 200,
        seed: 42,
        greedy: true,
        sampling: { response_format: { type: 'json_schema', json_schema: { name: 'answer', schema: answerSchema } } },
      }),
    );
    expect(endOf(events).finish_reason).toBe('stop');
    expect(JSON.parse(text(events))).toEqual({ answer: expect.stringMatching(/^(yes|no)$/) as unknown });
  });

  it('cache_prompt: a second turn extending the first is served mostly from the slot cache', async () => {
    const turn1 = await collect(
      chatEvents(client, { messages: conversation, max_tokens: 16, seed: 1, greedy: true, cache_prompt: true }),
    );
    const end1 = endOf(turn1);
    const turn2Messages: ChatMessage[] = [
      ...conversation,
      { role: 'assistant', content: text(turn1) },
      { role: 'user', content: 'And tomorrow?' },
    ];
    const end2 = endOf(
      await collect(
        chatEvents(client, { messages: turn2Messages, max_tokens: 8, seed: 1, greedy: true, cache_prompt: true }),
      ),
    );
    process.stderr.write(
      `[measure] adapter chat turn 2: ${end2.cached_tokens}/${end2.prompt_tokens} prompt tokens cached (turn 1 prompt ${end1.prompt_tokens})\n`,
    );
    expect(end2.prompt_tokens).toBeGreaterThan(end1.prompt_tokens ?? 0);
    expect(end2.cached_tokens).toBeGreaterThanOrEqual((end1.prompt_tokens ?? 0) - 1);
  });

  it('logprobs: every content piece carries the engine probabilities', async () => {
    const events = await collect(
      chatEvents(client, {
        messages: conversation,
        max_tokens: 4,
        greedy: true,
        sampling: { logprobs: true, top_logprobs: 2 },
      }),
    );
    const tokens = events.filter((e) => e.type === 'token');
    expect(tokens.length).toBeGreaterThan(0);
    for (const t of tokens) expect(t.logprobs).toMatchObject({ content: [{ top_logprobs: [{}, {}] }] });
  });

  it('abort mid-stream closes the socket and the slot goes idle', async () => {
    const ac = new AbortController();
    let seen = 0;
    const err = await (async () => {
      for await (const ev of chatEvents(
        client,
        { messages: conversation, max_tokens: 100_000, greedy: true },
        ac.signal,
      )) {
        if (ev.type === 'token' && ++seen === 3) ac.abort();
      }
    })().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CompletionAbortedError);
    const t0 = performance.now();
    while ((await client.slots()).some((s) => s.is_processing)) {
      if (performance.now() - t0 > 2000) throw new Error('slot still processing 2 s after the abort');
      await new Promise((r) => setTimeout(r, 2));
    }
  });

  it('a prompt over the context is refused before the stream: INVALID_PARAMS with the engine message', async () => {
    const err = await collect(
      chatEvents(client, { messages: [{ role: 'user', content: 'word '.repeat(6000) }], max_tokens: 4 }),
    ).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(EngineRejectedError);
    expect(err).toMatchObject({ status: 400, errorCode: 'INVALID_PARAMS', retriable: false });
    expect((err as Error).message).toMatch(/context size/);
  });
});

describe('completion sampling against the real llama-server', () => {
  const prompt = 'Once upon a time, in a land far away,';

  it('stop ends the text before the stop word (stop_type word); the end reports prompt and cached tokens', async () => {
    const full = await collect(completeEvents(client, { prompt, max_tokens: 24, greedy: true }));
    expect(endOf(full)).toMatchObject({ finish_reason: 'length', stop_type: 'limit', cached_tokens: 0 });
    expect(endOf(full).prompt_tokens).toBeGreaterThan(5);
    const whole = text(full);
    const stop = whole.slice(4, 6);
    const cut = await collect(
      completeEvents(client, { prompt, max_tokens: 24, greedy: true, sampling: { stop: [stop] } }),
    );
    expect(text(cut)).toBe(whole.slice(0, whole.indexOf(stop)));
    expect(endOf(cut)).toMatchObject({ finish_reason: 'stop', stop_type: 'word' });
  });

  it('response_format json_schema becomes the engine grammar: the text parses and matches', async () => {
    const events = await collect(
      completeEvents(client, {
        prompt,
        max_tokens: 200,
        greedy: true,
        sampling: { response_format: { type: 'json_schema', json_schema: { schema: answerSchema } } },
      }),
    );
    expect(endOf(events).finish_reason).toBe('stop');
    expect(JSON.parse(text(events))).toEqual({ answer: expect.stringMatching(/^(yes|no)$/) as unknown });
  });

  it('cache_prompt: the same prompt again is served from the cache', async () => {
    await collect(completeEvents(client, { prompt, max_tokens: 4, greedy: true, cache_prompt: true }));
    const again = endOf(
      await collect(completeEvents(client, { prompt, max_tokens: 4, greedy: true, cache_prompt: true })),
    );
    expect(again.cached_tokens).toBe((again.prompt_tokens ?? 0) - 1);
  });

  it('logprobs become n_probs: pieces carry completion_probabilities', async () => {
    const events = await collect(
      completeEvents(client, { prompt, max_tokens: 4, greedy: true, sampling: { logprobs: true, top_logprobs: 3 } }),
    );
    const tokens = events.filter((e) => e.type === 'token');
    expect(tokens.length).toBeGreaterThan(0);
    expect(tokens[0]?.logprobs).toMatchObject([{ top_logprobs: [{}, {}, {}] }]);
  });
});
