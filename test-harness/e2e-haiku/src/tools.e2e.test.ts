import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { ChatOpenAI } from '@langchain/openai';
import { generateText, stepCountIs, tool } from 'ai';
import { join } from 'node:path';
import OpenAI from 'openai';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { engineUrlOf, repoRoot, startCluster, waitClusterIdle, type Cluster } from './index.js';

// Tool calls end to end (issue 27): real orchestratord → pool-managerd → llama-server with the
// synthetic model's tool-use template, so every call below is parsed and constrained by the
// engine's own chat parser and grammar. Clients: the official `openai` client, the Vercel AI SDK
// and LangChain; parity with the engine's own route at a fixed seed and temperature 0.
const MODEL = 'synthetic:llama?ctx=4096';
const cacheDir = process.env.LLORCH_TEST_CACHE_DIR ?? join(repoRoot(), '.cache', 'llama-orch');

let cluster: Cluster;
let client: OpenAI;

beforeAll(async () => {
  cluster = await startCluster({
    model: MODEL,
    nodes: 1,
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

const tools: OpenAI.Chat.ChatCompletionTool[] = [
  {
    type: 'function',
    function: {
      name: 'get_weather',
      description: 'The weather in a city',
      parameters: {
        type: 'object',
        properties: { city: { type: 'string', enum: ['Paris', 'Tokyo'] } },
        required: ['city'],
      },
    },
  },
  {
    type: 'function',
    // no properties (and llama.cpp's grammar adds none unless additionalProperties says so): its arguments are `{}`
    function: { name: 'get_time', description: 'The time now', parameters: { type: 'object', properties: {} } },
  },
];
const ask: OpenAI.Chat.ChatCompletionMessageParam[] = [{ role: 'user', content: 'What is the weather in Paris?' }];
const fixed = { seed: 5, temperature: 0, max_tokens: 300 } as const;

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

/** A body without what differs between two runs: ids (the response's and the calls'), created, model, timing values. */
function comparable(body: Record<string, unknown>): unknown {
  const { id: _id, created: _c, model: _m, timings: _t, ...rest } = body;
  return JSON.parse(JSON.stringify(rest).replace(/"id":"[^"]*"/g, '"id":"*"'));
}

/** The `data:` payloads of an SSE body, each without ids, created, model, timings and usage (the usage chunk is compared apart). */
function comparableChunks(text: string): unknown[] {
  return [...text.matchAll(/^data: (.*)$/gm)]
    .map((m) => m[1]!)
    .filter((d) => d !== '[DONE]')
    .map((d) => comparable(JSON.parse(d) as Record<string, unknown>));
}

/** Arguments that fit the schema of the tool the model called (each tool's grammar allows only these); a call of another tool fails. */
function argsFitting(name: string): unknown {
  if (name === 'get_weather') return { city: expect.stringMatching(/^(Paris|Tokyo)$/) as unknown };
  if (name === 'get_time') return {};
  throw new Error(`the model called '${name}', which is not one of the tools`);
}
describe('tool calls through /v1/chat/completions with the openai client', () => {
  it('non-streamed, required: one call whose arguments fit the schema, finish_reason tool_calls; the body equals the engine’s own apart from ids', async () => {
    await waitClusterIdle(cluster);
    const done = await client.chat.completions.create({
      model: MODEL,
      messages: ask,
      tools,
      tool_choice: 'required',
      ...fixed,
    });
    const choice = done.choices[0]!;
    expect(choice.finish_reason).toBe('tool_calls');
    expect(choice.message.tool_calls).toHaveLength(1);
    const call = choice.message.tool_calls![0]!;
    expect(call.type).toBe('function');
    if (call.type !== 'function') return;
    expect(call.id).toMatch(/\S/);
    expect(JSON.parse(call.function.arguments)).toEqual(argsFitting(call.function.name));

    const engineUrl = await engineUrlOf(cluster, cluster.nodes[0]!.poolId);
    const body = { messages: ask, tools, tool_choice: 'required', ...fixed, cache_prompt: true, stream: false };
    const door = await post(
      cluster.orchestrator.url,
      '/v1/chat/completions',
      { model: MODEL, ...body },
      { authorization: `Bearer ${cluster.token}` },
    );
    const engine = await post(engineUrl, '/v1/chat/completions', body);
    expect(door.status, door.text).toBe(200);
    expect(comparable(JSON.parse(door.text) as Record<string, unknown>)).toEqual(
      comparable(JSON.parse(engine.text) as Record<string, unknown>),
    );
  });

  it('streamed, auto: delta.tool_calls in OpenAI’s incremental shape (index, id, name, argument pieces), finish_reason tool_calls; the chunks equal the engine’s own apart from ids', async () => {
    await waitClusterIdle(cluster);
    const stream = await client.chat.completions.create({
      model: MODEL,
      messages: ask,
      tools,
      tool_choice: 'auto',
      ...fixed,
      stream: true,
      stream_options: { include_usage: true },
    });
    const deltas: OpenAI.Chat.ChatCompletionChunk.Choice.Delta.ToolCall[] = [];
    let finish: string | null = null;
    let usage: OpenAI.CompletionUsage | null | undefined;
    for await (const chunk of stream) {
      const c = chunk.choices[0];
      if (c?.delta.tool_calls) deltas.push(...c.delta.tool_calls);
      if (c?.finish_reason) finish = c.finish_reason;
      if (chunk.usage) usage = chunk.usage;
    }
    expect(finish).toBe('tool_calls');
    expect(usage?.completion_tokens).toBeGreaterThan(0);
    expect(deltas.length).toBeGreaterThanOrEqual(2);
    expect(deltas[0]).toMatchObject({
      index: 0,
      id: expect.any(String),
      type: 'function',
      function: { name: expect.stringMatching(/^get_(weather|time)$/) },
    });
    for (const d of deltas.slice(1)) expect(d).toMatchObject({ index: 0, function: { arguments: expect.any(String) } });
    const args = deltas.map((d) => d.function?.arguments ?? '').join('');
    expect(() => JSON.parse(args) as unknown).not.toThrow();

    const engineUrl = await engineUrlOf(cluster, cluster.nodes[0]!.poolId);
    const body = {
      messages: ask,
      tools,
      tool_choice: 'auto',
      ...fixed,
      cache_prompt: true,
      stream: true,
      stream_options: { include_usage: true },
    };
    const door = await post(
      cluster.orchestrator.url,
      '/v1/chat/completions',
      { model: MODEL, ...body },
      { authorization: `Bearer ${cluster.token}` },
    );
    const engine = await post(engineUrl, '/v1/chat/completions', body);
    const strip = (chunks: unknown[]): unknown[] =>
      chunks.map((c) => (typeof c === 'object' && c !== null && 'usage' in c ? { usage_chunk: true } : c));
    expect(strip(comparableChunks(door.text))).toEqual(strip(comparableChunks(engine.text)));
  });

  it('the follow-up turn: the assistant’s tool_calls and the role "tool" result go back, and the model answers in text', async () => {
    await waitClusterIdle(cluster);
    const first = await client.chat.completions.create({
      model: MODEL,
      messages: ask,
      tools,
      tool_choice: 'required',
      ...fixed,
    });
    const message = first.choices[0]!.message;
    const call = message.tool_calls![0]!;
    const followUp = await client.chat.completions.create({
      model: MODEL,
      messages: [
        ...ask,
        { role: 'assistant', content: message.content, tool_calls: message.tool_calls },
        { role: 'tool', tool_call_id: call.id, content: 'sunny, 21 C' },
      ],
      tools,
      seed: 5,
      temperature: 0,
      max_tokens: 12,
    });
    const answer = followUp.choices[0]!;
    expect(answer.message.tool_calls ?? []).toEqual([]);
    expect(answer.message.content).toMatch(/\S/);
    expect(answer.finish_reason).toMatch(/^(stop|length)$/);
  });

  it('a named function is the one called; a name that is not among the tools is a 400 naming tool_choice', async () => {
    await waitClusterIdle(cluster);
    const named = await client.chat.completions.create({
      model: MODEL,
      messages: ask,
      tools,
      tool_choice: { type: 'function', function: { name: 'get_time' } },
      ...fixed,
    });
    const call = named.choices[0]!.message.tool_calls![0]!;
    expect(call.type === 'function' && call.function.name).toBe('get_time');
    expect(call.type === 'function' && JSON.parse(call.function.arguments)).toEqual({});
    expect(named.choices[0]!.finish_reason).toBe('tool_calls');
    const err = await client.chat.completions
      .create({
        model: MODEL,
        messages: ask,
        tools,
        tool_choice: { type: 'function', function: { name: 'nope' } },
        ...fixed,
      })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect((err as InstanceType<typeof OpenAI.BadRequestError>).error).toMatchObject({
      type: 'invalid_request_error',
      param: 'tool_choice',
      code: 'invalid_value',
    });
  });
});

describe('agent frameworks over the door', () => {
  it('the Vercel AI SDK: generateText with a tool runs the multi-step loop (call → execute → answer)', async () => {
    await waitClusterIdle(cluster);
    const provider = createOpenAICompatible({
      name: 'llama-orch',
      baseURL: `${cluster.orchestrator.url}/v1`,
      apiKey: cluster.token,
    });
    const executed: unknown[] = [];
    const result = await generateText({
      model: provider(MODEL),
      prompt: 'What is the weather in Paris?',
      tools: {
        get_weather: tool({
          description: 'The weather in a city',
          inputSchema: z.object({ city: z.enum(['Paris', 'Tokyo']) }),
          execute: async ({ city }) => {
            executed.push(city);
            return { city, sky: 'sunny', celsius: 21 };
          },
        }),
      },
      toolChoice: 'auto',
      stopWhen: stepCountIs(3),
      maxOutputTokens: 300,
      temperature: 0,
      seed: 5,
    });
    expect(executed).toHaveLength(1);
    expect(result.steps.length).toBe(2);
    expect(result.steps[0]!.finishReason).toBe('tool-calls');
    expect(result.steps[0]!.toolCalls[0]).toMatchObject({ toolName: 'get_weather', input: { city: executed[0] } });
    expect(result.steps[0]!.toolResults[0]).toMatchObject({ toolName: 'get_weather', output: { sky: 'sunny' } });
    expect(result.steps[1]!.toolCalls).toEqual([]);
    expect(result.text).toMatch(/\S/);
  });

  it('LangChain: ChatOpenAI(...).bindTools gives tool_calls with parsed arguments', async () => {
    await waitClusterIdle(cluster);
    const model = new ChatOpenAI({
      model: MODEL,
      apiKey: cluster.token,
      configuration: { baseURL: `${cluster.orchestrator.url}/v1` },
      temperature: 0,
      maxTokens: 300,
      maxRetries: 0,
    }).bindTools(tools, { tool_choice: 'required' });
    const reply = await model.invoke('What is the weather in Paris?');
    expect(reply.tool_calls).toHaveLength(1);
    const call = reply.tool_calls![0]!;
    expect(call.args).toEqual(argsFitting(call.name));
    expect(call.id).toMatch(/\S/);
  });
});
