import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { directChat, engineUrlOf, placedPool, repoRoot, startCluster, waitClusterIdle, type Cluster } from './index.js';

// What the engine does with a /v1 request, end to end: the same bytes as asking the engine
// directly, sampling controls honoured, and a conversation kept on the pool holding its prompt
// cache. Two nodes serving the same synthetic model (real llama-server, chat template in the GGUF),
// trained for 2048 tokens: llama-server caps a slot's context at the model's, and a conversation of
// three turns does not fit the default synthetic model's 256.
const MODEL = 'synthetic:llama?ctx=2048';
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

type Messages = OpenAI.Chat.ChatCompletionMessageParam[];

/** Streams a chat through /v1 with a correlation id; returns its content, finish reason, usage and pool. */
async function streamChat(
  body: Omit<OpenAI.Chat.ChatCompletionCreateParamsStreaming, 'stream'>,
  headers: Record<string, string> = {},
) {
  const correlationId = randomUUID();
  const stream = await client.chat.completions.create(
    { ...body, stream: true, stream_options: { include_usage: true } },
    { headers: { ...headers, 'x-correlation-id': correlationId } },
  );
  let text = '';
  let finishReason: string | undefined;
  let usage: OpenAI.CompletionUsage | undefined;
  for await (const c of stream) {
    text += c.choices[0]?.delta.content ?? '';
    finishReason = c.choices[0]?.finish_reason ?? finishReason;
    if (c.usage) usage = c.usage;
  }
  return { text, finishReason, usage: usage!, pool: await placedPool(cluster, correlationId) };
}

/** A word list long enough to matter for the cache, different per turn. */
function notes(turn: number): string {
  const words = [
    'lantern',
    'harbor',
    'meadow',
    'copper',
    'violet',
    'signal',
    'orbit',
    'canyon',
    'thunder',
    'velvet',
    'compass',
    'garden',
  ];
  return `Turn ${turn} notes: ${Array.from({ length: 60 }, (_, i) => words[(i * 7 + turn * 3) % words.length]).join(' ')}. Summarise them.`;
}

describe('/v1 chat against the engine itself', () => {
  it('a fixed seed and temperature 0 give the same content as the same request sent straight to the engine', async () => {
    const messages: Messages = [
      { role: 'system', content: 'You write short poems.' },
      { role: 'user', content: 'A poem about cooling fans.' },
    ];
    const viaDoor = await streamChat({ model: MODEL, messages, max_tokens: 24, seed: 11, temperature: 0 });
    const direct = await directChat(await engineUrlOf(cluster, viaDoor.pool), {
      messages,
      max_tokens: 24,
      seed: 11,
      temperature: 0,
    });
    expect(viaDoor.text.length).toBeGreaterThan(0);
    expect(viaDoor.text).toBe(direct.text);
    expect(viaDoor.usage.completion_tokens).toBe(direct.completionTokens);
    expect(viaDoor.usage.prompt_tokens).toBe(direct.promptTokens);
    expect(viaDoor.finishReason).toBe(direct.finishReason);
  });

  // Greedy decoding of a random model repeats one piece; seeded sampling shows varied text is
  // relayed unchanged too (the seed decides every token).
  it("a fixed seed with sampling (temperature 0.8, top_p 0.9) gives the engine's own varied text", async () => {
    const messages: Messages = [{ role: 'user', content: 'Describe a rack of servers at dawn.' }];
    const viaDoor = await streamChat({
      model: MODEL,
      messages,
      max_tokens: 24,
      seed: 12,
      temperature: 0.8,
      top_p: 0.9,
    });
    const direct = await directChat(await engineUrlOf(cluster, viaDoor.pool), {
      messages,
      max_tokens: 24,
      seed: 12,
      temperature: 0.8,
      top_p: 0.9,
    });
    expect(new Set(viaDoor.text).size, 'varied text').toBeGreaterThan(3);
    expect(viaDoor.text).toBe(direct.text);
    expect(viaDoor.usage.completion_tokens).toBe(direct.completionTokens);
  });
});

describe('sampling controls end to end', () => {
  /** A stop string from the middle of an answer: its first occurrence must not be at the start. */
  function stopFrom(text: string): { stop: string; before: string } {
    for (let at = Math.floor(text.length / 3); at < text.length - 2; at++) {
      const stop = text.slice(at, at + 3);
      const first = text.indexOf(stop);
      if (stop.trim() !== '' && first > 0) return { stop, before: text.slice(0, first) };
    }
    throw new Error(`no usable stop string in ${JSON.stringify(text)}`);
  }

  it('stop ends a chat answer before the stop string (finish_reason stop)', async () => {
    const body = {
      model: MODEL,
      messages: [{ role: 'user', content: 'Count the stars.' }] as Messages,
      max_tokens: 32,
      seed: 21,
      temperature: 0,
    };
    const full = await streamChat(body);
    const { stop, before } = stopFrom(full.text);
    const stopped = await client.chat.completions.create({ ...body, stop: [stop] });
    expect(stopped.choices[0]?.message.content).toBe(before);
    expect(stopped.choices[0]?.finish_reason).toBe('stop');
    const streamed = await streamChat({ ...body, stop });
    expect(streamed.text).toBe(before);
    expect(streamed.finishReason).toBe('stop');
  });

  it('stop ends a text completion before the stop string', async () => {
    const body = {
      model: MODEL,
      prompt: 'The night shift at the data centre',
      max_tokens: 32,
      seed: 22,
      temperature: 0,
    };
    const full = await client.completions.create(body);
    const { stop, before } = stopFrom(full.choices[0]!.text);
    const stopped = await client.completions.create({ ...body, stop });
    expect(stopped.choices[0]?.text).toBe(before);
    expect(stopped.choices[0]?.finish_reason).toBe('stop');
  });

  it('response_format json_schema: the answer is JSON matching the schema', async () => {
    const schema = {
      type: 'object',
      properties: {
        color: { type: 'string', enum: ['red', 'green', 'blue'] },
        count: { type: 'integer', minimum: 0, maximum: 9 },
      },
      required: ['color', 'count'],
      additionalProperties: false,
    };
    for (const seed of [1, 2, 3]) {
      const r = await client.chat.completions.create({
        model: MODEL,
        messages: [{ role: 'user', content: 'Pick a color and a count.' }],
        max_tokens: 200,
        seed,
        temperature: 0.8,
        response_format: { type: 'json_schema', json_schema: { name: 'pick', schema } },
      });
      const content = r.choices[0]?.message.content ?? '';
      expect(r.choices[0]?.finish_reason, content).toBe('stop');
      const parsed = JSON.parse(content) as { color: string; count: number };
      expect(Object.keys(parsed).sort()).toEqual(['color', 'count']);
      expect(['red', 'green', 'blue']).toContain(parsed.color);
      expect(Number.isInteger(parsed.count) && parsed.count >= 0 && parsed.count <= 9).toBe(true);
    }
  });
});

describe('session affinity over two pools', () => {
  // The conversation key of a /v1 request: the body's `user`, or an `X-Session-Id` header.
  it.each([
    ['the same user', (key: string) => ({ body: { user: key }, headers: {} })],
    ['the same X-Session-Id', (key: string) => ({ body: {}, headers: { 'x-session-id': key } })],
  ])('keeps one conversation (%s) on its pool while the cached share of its prompt grows', async (_, keyed) => {
    await waitClusterIdle(cluster);
    // A long answer for someone else holds one pool, so the conversation starts on the other; once
    // both are free again, placement alone would pick by load and pool order, affinity by history.
    const blockerId = randomUUID();
    const blocker = await client.chat.completions.create(
      // logit_bias bans the end-of-text token (id 2 in the llama vocab): the blocker cannot end early
      {
        model: MODEL,
        messages: [{ role: 'user', content: 'Keep talking.' }],
        max_tokens: 1500,
        stream: true,
        user: `other-${randomUUID()}`,
        logit_bias: { 2: -100 },
      },
      { headers: { 'x-correlation-id': blockerId } },
    );
    const it = blocker[Symbol.asyncIterator]();
    await it.next();
    const blockedPool = await placedPool(cluster, blockerId);

    const key = keyed(`conversation-${randomUUID()}`);
    const messages: Messages = [
      { role: 'system', content: 'You summarise notes.' },
      { role: 'user', content: notes(1) },
    ];
    const turns = [await streamChat({ model: MODEL, messages, max_tokens: 8, seed: 1, ...key.body }, key.headers)];
    expect(turns[0]!.pool).not.toBe(blockedPool);
    blocker.controller.abort();
    await it.return?.();
    await waitClusterIdle(cluster);

    for (let turn = 2; turn <= 3; turn++) {
      messages.push({ role: 'assistant', content: turns.at(-1)!.text }, { role: 'user', content: notes(turn) });
      turns.push(await streamChat({ model: MODEL, messages, max_tokens: 8, seed: turn, ...key.body }, key.headers));
    }
    const summary = turns
      .map((t) => `${t.pool}: prompt ${t.usage.prompt_tokens}, cached ${t.usage.prompt_tokens_details?.cached_tokens}`)
      .join('; ');
    expect(
      turns.map((t) => t.pool),
      summary,
    ).toEqual([turns[0]!.pool, turns[0]!.pool, turns[0]!.pool]);
    const cached = turns.map((t) => t.usage.prompt_tokens_details?.cached_tokens ?? 0);
    expect(cached[1], summary).toBeGreaterThan(0);
    expect(cached[2], summary).toBeGreaterThan(cached[1]!);
    // each later turn finds (nearly) all of the previous turn's prompt in the cache
    expect(cached[1]!, summary).toBeGreaterThanOrEqual(turns[0]!.usage.prompt_tokens * 0.9);
    expect(cached[2]!, summary).toBeGreaterThanOrEqual(turns[1]!.usage.prompt_tokens * 0.9);
  });
});
