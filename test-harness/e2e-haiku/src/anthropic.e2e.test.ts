import Anthropic from '@anthropic-ai/sdk';
import { join } from 'node:path';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { engineUrlOf, repoRoot, startCluster, waitClusterIdle, type Cluster } from './index.js';

// The Anthropic Messages door (issue 27) with the official Anthropic TypeScript SDK against a real
// cluster (orchestratord → pool-managerd → llama-server, synthetic model with its tool-use
// template), and parity with the engine's own /v1/messages at temperature 0.
const MODEL = 'synthetic:llama?ctx=4096';
const cacheDir = process.env.LLORCH_TEST_CACHE_DIR ?? join(repoRoot(), '.cache', 'llama-orch');

let cluster: Cluster;
let client: Anthropic;

beforeAll(async () => {
  cluster = await startCluster({
    model: MODEL,
    nodes: 1,
    gpu: 'off',
    cacheDir,
    heartbeatMs: 500,
    readyTimeoutMs: 30 * 60_000,
  });
  // The SDK sends its key as `x-api-key`.
  client = new Anthropic({ baseURL: cluster.orchestrator.url, apiKey: cluster.token, maxRetries: 0, timeout: 60_000 });
}, 31 * 60_000);

afterAll(async () => {
  await cluster?.close();
}, 60_000);

const tools: Anthropic.Tool[] = [
  {
    name: 'get_weather',
    description: 'The weather in a city',
    input_schema: {
      type: 'object',
      properties: { city: { type: 'string', enum: ['Paris', 'Tokyo'] } },
      required: ['city'],
    },
  },
];
/** Greedy decoding: this SDK's types no longer list `temperature` for every model, the API (and the door) still take it. */
const greedy = { temperature: 0 } as object;
const ask: Anthropic.MessageParam[] = [{ role: 'user', content: 'A poem about cooling fans.' }];

async function post(
  url: string,
  path: string,
  body: object,
  headers: Record<string, string> = {},
): Promise<{ status: number; text: string }> {
  const res = await request(new URL(path, url), {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
    reset: true,
  });
  return { status: res.statusCode, text: await res.body.text() };
}

/** The same request to the door and to the engine's own route (the engine's first, once, so both find the prompt cached). */
async function both(
  path: string,
  body: object,
): Promise<{ door: { status: number; text: string }; engine: { status: number; text: string } }> {
  await waitClusterIdle(cluster);
  const engineUrl = await engineUrlOf(cluster, cluster.nodes[0]!.poolId);
  await post(engineUrl, path, body);
  const door = await post(cluster.orchestrator.url, path, { model: MODEL, ...body }, { 'x-api-key': cluster.token });
  const engine = await post(engineUrl, path, body);
  return { door, engine };
}

/** Without what differs between runs: ids (the message's and the tool calls'), model. */
function comparable(text: string): unknown {
  return JSON.parse(text.replace(/"id":"[^"]*"/g, '"id":"*"').replace(/"model":"[^"]*"/g, '"model":"*"')) as unknown;
}

/** The events of an Anthropic stream without `ping`, ids, model, and the usage figures only the engine knows at its first event. */
function comparableEvents(text: string): unknown[] {
  const events = [...text.matchAll(/^event: (\w+)\ndata: (.*)$/gm)].filter((m) => m[1] !== 'ping');
  return events.map((m) => {
    const data = comparable(m[2]!) as Record<string, unknown>;
    if (data.type === 'message_start') (data.message as Record<string, unknown>).usage = '*';
    if (data.type === 'message_delta')
      data.usage = { output_tokens: (data.usage as { output_tokens: number }).output_tokens };
    const block = data.content_block as Record<string, unknown> | undefined;
    if (block?.type === 'tool_use') delete block.input;
    return data;
  });
}

describe('/v1/messages with the Anthropic SDK', () => {
  it('non-streamed: a text message with stop_reason and usage; the body equals the engine’s own /v1/messages apart from ids and model', async () => {
    await waitClusterIdle(cluster);
    const msg = await client.messages.create({
      model: MODEL,
      max_tokens: 24,
      ...greedy,
      system: 'Be brief.',
      messages: ask,
    });
    expect(msg).toMatchObject({
      type: 'message',
      role: 'assistant',
      model: MODEL,
      stop_reason: 'max_tokens',
      stop_sequence: null,
    });
    expect(msg.id).toMatch(/^msg_[0-9a-f-]{36}$/);
    expect(msg.content[0]).toMatchObject({ type: 'text', text: expect.stringMatching(/\S/) as unknown });
    expect(msg.usage.output_tokens).toBe(24);
    expect(msg.usage.input_tokens + (msg.usage.cache_read_input_tokens ?? 0)).toBeGreaterThan(0);

    const { door, engine } = await both('/v1/messages', {
      max_tokens: 24,
      temperature: 0,
      system: 'Be brief.',
      messages: ask,
    });
    expect(door.status, door.text).toBe(200);
    expect(comparable(door.text)).toEqual(comparable(engine.text));
  });

  it('streamed: message_start, ping, content_block_start/delta/stop, message_delta, message_stop; the events equal the engine’s own apart from ping and ids', async () => {
    await waitClusterIdle(cluster);
    const stream = client.messages.stream({ model: MODEL, max_tokens: 24, temperature: 0, messages: ask });
    const types: string[] = [];
    stream.on('streamEvent', (e) => types.push(e.type));
    const final = await stream.finalMessage();
    // The SDK reads `ping` and does not pass it on; the raw stream below has it.
    expect(types.slice(0, 2)).toEqual(['message_start', 'content_block_start']);
    expect(types.slice(-3)).toEqual(['content_block_stop', 'message_delta', 'message_stop']);
    expect(types.filter((t) => t === 'content_block_delta').length).toBeGreaterThan(0);
    expect(final.stop_reason).toBe('max_tokens');
    expect(final.usage.output_tokens).toBe(24);
    expect(final.content[0]).toMatchObject({ type: 'text', text: expect.stringMatching(/\S/) as unknown });

    const { door, engine } = await both('/v1/messages', {
      max_tokens: 24,
      temperature: 0,
      messages: ask,
      stream: true,
    });
    expect(door.status).toBe(200);
    expect(door.text).toMatch(/^event: message_start\ndata: .*\n\nevent: ping\ndata: \{"type":"ping"\}\n\n/);
    expect(comparableEvents(door.text)).toEqual(comparableEvents(engine.text));
  });

  it('tools: tool_choice any gives a tool_use block (streamed and not) that equals the engine’s; the tool_result turn is answered in text', async () => {
    const body = {
      max_tokens: 300,
      temperature: 0,
      messages: [{ role: 'user', content: 'Weather in Paris?' }],
      tools,
      tool_choice: { type: 'any' },
    };
    const done = await client.messages.create({ model: MODEL, ...body } as Anthropic.MessageCreateParamsNonStreaming);
    expect(done.stop_reason).toBe('tool_use');
    const use = done.content.find((b) => b.type === 'tool_use');
    expect(use).toMatchObject({
      type: 'tool_use',
      name: 'get_weather',
      input: { city: expect.stringMatching(/^(Paris|Tokyo)$/) as unknown },
    });

    const streamed = await client.messages
      .stream({ model: MODEL, ...body } as Anthropic.MessageStreamParams)
      .finalMessage();
    expect(streamed.stop_reason).toBe('tool_use');
    expect(streamed.content.find((b) => b.type === 'tool_use')).toMatchObject({
      name: 'get_weather',
      input: (use as Anthropic.ToolUseBlock).input,
    });

    const plain = await both('/v1/messages', body);
    expect(comparable(plain.door.text)).toEqual(comparable(plain.engine.text));
    const events = await both('/v1/messages', { ...body, stream: true });
    expect(comparableEvents(events.door.text)).toEqual(comparableEvents(events.engine.text));

    const followUp = await client.messages.create({
      model: MODEL,
      max_tokens: 12,
      ...greedy,
      tools,
      messages: [
        { role: 'user', content: 'Weather in Paris?' },
        { role: 'assistant', content: [use as Anthropic.ToolUseBlock] },
        {
          role: 'user',
          content: [{ type: 'tool_result', tool_use_id: (use as Anthropic.ToolUseBlock).id, content: 'sunny, 21 C' }],
        },
      ],
    });
    expect(followUp.content.filter((b) => b.type === 'tool_use')).toEqual([]);
    expect(followUp.content[0]).toMatchObject({ type: 'text' });
  });

  it('count_tokens counts with the engine’s tokenizer: equal to the engine’s own count, tools included; Bearer auth works too', async () => {
    await waitClusterIdle(cluster);
    const counted = await client.messages.countTokens({ model: MODEL, system: 'Be brief.', messages: ask, tools });
    expect(counted.input_tokens).toBeGreaterThan(5);
    const engineUrl = await engineUrlOf(cluster, cluster.nodes[0]!.poolId);
    const engine = await post(engineUrl, '/v1/messages/count_tokens', {
      model: MODEL,
      system: 'Be brief.',
      messages: ask,
      tools,
    });
    expect(JSON.parse(engine.text)).toEqual({ input_tokens: counted.input_tokens });
    const bearer = new Anthropic({
      baseURL: cluster.orchestrator.url,
      authToken: cluster.token,
      apiKey: null,
      maxRetries: 0,
    });
    expect((await bearer.messages.countTokens({ model: MODEL, messages: ask })).input_tokens).toBeGreaterThan(0);
  });

  it('errors in Anthropic’s shape: 400 for a bad body, 401 for a wrong key, 404 for an unknown model', async () => {
    const bad = await post(
      cluster.orchestrator.url,
      '/v1/messages',
      { model: MODEL, messages: ask },
      { 'x-api-key': cluster.token },
    );
    expect(bad.status).toBe(400);
    expect(JSON.parse(bad.text)).toEqual({
      type: 'error',
      error: { type: 'invalid_request_error', message: expect.stringContaining('max_tokens') as unknown },
    });
    const image = await client.messages
      .create({
        model: MODEL,
        max_tokens: 4,
        messages: [
          { role: 'user', content: [{ type: 'image', source: { type: 'url', url: 'https://example.com/a.png' } }] },
        ],
      })
      .catch((e: unknown) => e);
    expect(image).toBeInstanceOf(Anthropic.BadRequestError);
    const wrongKey = await new Anthropic({ baseURL: cluster.orchestrator.url, apiKey: 'nope', maxRetries: 0 }).messages
      .create({ model: MODEL, max_tokens: 4, messages: ask })
      .catch((e: unknown) => e);
    expect(wrongKey).toBeInstanceOf(Anthropic.AuthenticationError);
    expect((wrongKey as InstanceType<typeof Anthropic.AuthenticationError>).error).toEqual({
      type: 'error',
      error: { type: 'authentication_error', message: expect.any(String) as unknown },
    });
    const unknown = await client.messages
      .create({ model: 'no-such-model', max_tokens: 4, messages: ask })
      .catch((e: unknown) => e);
    expect(unknown).toBeInstanceOf(Anthropic.NotFoundError);
  });
});
