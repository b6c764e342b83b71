import { join } from 'node:path';
import OpenAI from 'openai';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { engineUrlOf, repoRoot, startCluster, waitClusterIdle, type Cluster } from './index.js';

// The OpenAI Responses door (issue 27) with the official `openai` client against a real cluster
// (orchestratord → pool-managerd → llama-server, synthetic model with its tool-use template), and
// parity with the engine's own /v1/responses at temperature 0.
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

const tools: OpenAI.Responses.FunctionTool[] = [
  {
    type: 'function',
    name: 'get_weather',
    description: 'The weather in a city',
    parameters: {
      type: 'object',
      properties: { city: { type: 'string', enum: ['Paris', 'Tokyo'] } },
      required: ['city'],
      additionalProperties: false,
    },
    strict: true,
  },
];

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
async function both(body: object): Promise<{ door: string; engine: string }> {
  await waitClusterIdle(cluster);
  const engineUrl = await engineUrlOf(cluster, cluster.nodes[0]!.poolId);
  await post(engineUrl, '/v1/responses', body);
  const door = await post(
    cluster.orchestrator.url,
    '/v1/responses',
    { model: MODEL, ...body },
    { authorization: `Bearer ${cluster.token}` },
  );
  expect(door.status, door.text).toBe(200);
  const engine = await post(engineUrl, '/v1/responses', body);
  expect(engine.status, engine.text).toBe(200);
  return { door: door.text, engine: engine.text };
}

interface Item {
  type: string;
  content?: Array<{ type: string; text: string }>;
  name?: string;
  arguments?: string;
}

/** What both answers must agree on: the output items' kinds, texts, tool names and arguments, and the usage. */
function essence(response: { output: Item[]; usage: { input_tokens: number; output_tokens: number } }): unknown {
  return {
    output: response.output.map((i) => ({
      type: i.type,
      text: i.content?.map((c) => c.text).join(''),
      name: i.name,
      arguments: i.arguments,
    })),
    usage: { input_tokens: response.usage.input_tokens, output_tokens: response.usage.output_tokens },
  };
}

/** An SSE body's events as `{type, data}`; the final response event's response. */
function events(text: string): {
  types: string[];
  deltas: string;
  final: { output: Item[]; usage: { input_tokens: number; output_tokens: number } };
} {
  const all = [...text.matchAll(/^event: ([\w.]+)\ndata: (.*)$/gm)].map((m) => ({
    type: m[1]!,
    data: JSON.parse(m[2]!) as Record<string, unknown>,
  }));
  const deltas = all
    .filter((e) => e.type === 'response.output_text.delta' || e.type === 'response.function_call_arguments.delta')
    .map((e) => e.data.delta as string)
    .join('');
  const last = all.findLast((e) => e.type === 'response.completed' || e.type === 'response.incomplete');
  return { types: all.map((e) => e.type), deltas, final: last?.data.response as never };
}

describe('/v1/responses with the openai client', () => {
  it('non-streamed: instructions and a string input give a message item; cut by max_output_tokens it is incomplete; equal to the engine’s own apart from ids', async () => {
    await waitClusterIdle(cluster);
    const r = await client.responses.create({
      model: MODEL,
      instructions: 'Be brief.',
      input: 'A poem about cooling fans.',
      max_output_tokens: 24,
      temperature: 0,
    });
    expect(r).toMatchObject({
      object: 'response',
      model: MODEL,
      status: 'incomplete',
      incomplete_details: { reason: 'max_output_tokens' },
    });
    expect(r.id).toMatch(/^resp_[0-9a-f-]{36}$/);
    expect(r.output_text).toMatch(/\S/);
    expect(r.output[0]).toMatchObject({ type: 'message', role: 'assistant', status: 'completed' });
    expect(r.usage?.output_tokens).toBe(24);

    const { door, engine } = await both({
      instructions: 'Be brief.',
      input: 'A poem about cooling fans.',
      max_output_tokens: 24,
      temperature: 0,
    });
    expect(essence(JSON.parse(door) as never)).toEqual(essence(JSON.parse(engine) as never));
  });

  it('streamed: created, in_progress, item and part added, text deltas, done events, then the final response; deltas and result equal the engine’s', async () => {
    await waitClusterIdle(cluster);
    const stream = await client.responses.create({
      model: MODEL,
      input: [{ role: 'user', content: 'A poem about cooling fans.' }],
      max_output_tokens: 24,
      temperature: 0,
      stream: true,
    });
    const types: string[] = [];
    let text = '';
    for await (const e of stream) {
      types.push(e.type);
      if (e.type === 'response.output_text.delta') text += e.delta;
    }
    expect(types.slice(0, 4)).toEqual([
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.content_part.added',
    ]);
    expect(types.slice(-4)).toEqual([
      'response.output_text.done',
      'response.content_part.done',
      'response.output_item.done',
      'response.incomplete',
    ]);
    expect(text).toMatch(/\S/);
    // The SDK's stream helper checks indices and accumulates the snapshot.
    const helper = await client.responses
      .stream({ model: MODEL, input: 'A poem about cooling fans.', max_output_tokens: 24, temperature: 0 })
      .finalResponse();
    expect(helper.output_text).toMatch(/\S/);

    const { door, engine } = await both({
      input: 'A poem about cooling fans.',
      max_output_tokens: 24,
      temperature: 0,
      stream: true,
    });
    const d = events(door);
    const e = events(engine);
    expect(d.deltas).toBe(e.deltas);
    expect(essence(d.final)).toEqual(essence(e.final));
  });

  it('tools: a required call is a function_call item (streamed and not, equal to the engine’s); its output in the next input is answered in text', async () => {
    await waitClusterIdle(cluster);
    const input = 'What is the weather in Paris?';
    const r = await client.responses.create({
      model: MODEL,
      input,
      tools,
      tool_choice: 'required',
      max_output_tokens: 300,
      temperature: 0,
    });
    const call = r.output.find((i): i is OpenAI.Responses.ResponseFunctionToolCall => i.type === 'function_call');
    expect(call).toMatchObject({ type: 'function_call', name: 'get_weather', status: 'completed' });
    expect(JSON.parse(call!.arguments)).toEqual({ city: expect.stringMatching(/^(Paris|Tokyo)$/) as unknown });
    expect(r.status).toBe('completed');

    const plain = await both({ input, tools, tool_choice: 'required', max_output_tokens: 300, temperature: 0 });
    expect(essence(JSON.parse(plain.door) as never)).toEqual(essence(JSON.parse(plain.engine) as never));
    const streamed = await both({
      input,
      tools,
      tool_choice: 'required',
      max_output_tokens: 300,
      temperature: 0,
      stream: true,
    });
    expect(events(streamed.door).deltas).toBe(events(streamed.engine).deltas);
    expect(essence(events(streamed.door).final)).toEqual(essence(events(streamed.engine).final));

    const next = await client.responses.create({
      model: MODEL,
      input: [
        { role: 'user', content: input },
        { type: 'function_call', call_id: call!.call_id, name: call!.name, arguments: call!.arguments },
        { type: 'function_call_output', call_id: call!.call_id, output: 'sunny, 21 C' },
      ],
      tools,
      max_output_tokens: 12,
      temperature: 0,
    });
    expect(next.output.filter((i) => i.type === 'function_call')).toEqual([]);
    expect(next.output_text).toMatch(/\S/);
  });

  it('conversation objects, background without store and other tools are a 400 naming the field, in OpenAI’s shape', async () => {
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ conversation: 'conv_123' }, 'conversation'],
      [{ background: true, store: false }, 'background'],
      [{ tools: [{ type: 'web_search' }] }, 'tools.0.type'],
      [
        { input: [{ role: 'user', content: [{ type: 'input_image', image_url: 'https://example.com/a.png' }] }] },
        'input.0.content.0.type',
      ],
    ];
    for (const [extra, param] of cases) {
      const err = await client.responses
        .create({ model: MODEL, input: 'hi', ...extra } as OpenAI.Responses.ResponseCreateParamsNonStreaming)
        .catch((e: unknown) => e);
      expect(err, param).toBeInstanceOf(OpenAI.BadRequestError);
      expect((err as InstanceType<typeof OpenAI.BadRequestError>).error, param).toMatchObject({
        type: 'invalid_request_error',
        param: expect.stringContaining(param) as unknown,
      });
    }
    const unknown = await client.responses.create({ model: 'no-such-model', input: 'hi' }).catch((e: unknown) => e);
    expect(unknown).toBeInstanceOf(OpenAI.NotFoundError);
    // (stored responses: responses-stored.e2e.test.ts)
    const previous = await client.responses
      .create({ model: MODEL, input: 'hi', previous_response_id: 'resp_123' })
      .catch((e: unknown) => e);
    expect(previous).toBeInstanceOf(OpenAI.NotFoundError);
    expect((previous as InstanceType<typeof OpenAI.NotFoundError>).error).toMatchObject({
      code: 'previous_response_not_found',
      param: 'previous_response_id',
    });
  });
});
