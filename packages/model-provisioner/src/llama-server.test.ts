/**
 * The synthetic model in the REAL llama-server (built from the bundled llama.cpp by
 * engine-provisioner into the shared test cache; the first run builds it, ~5 minutes on 2 cores).
 */
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { ensureCpuTestEngine, findFreePort, scrubEngineEnv } from '@llama-orch/engine-provisioner';
import { ModelProvisioner, SYNTHETIC_CHAT_TEMPLATE, SYNTHETIC_TOOL_USE_TEMPLATE } from './index.js';
import type { ResolvedModel } from '@llama-orch/contracts';
import { TempDirs, testLogger, testVocabPath } from './test-helpers.js';

const temp = new TempDirs();
let binary: string;
let model: ResolvedModel;
let provisioner: ModelProvisioner;
const children: ChildProcess[] = [];

beforeAll(async () => {
  const engine = await ensureCpuTestEngine(testLogger());
  binary = engine.binary_path;
  provisioner = new ModelProvisioner({
    cacheDir: await temp.make(),
    logger: testLogger(),
    vocabPath: await testVocabPath(),
    progressTty: false,
  });
  model = await provisioner.ensure('synthetic:llama');
}, 40 * 60_000);

afterAll(async () => {
  for (const c of children) {
    if (c.exitCode === null && c.signalCode === null) {
      const exited = new Promise((r) => c.once('exit', r));
      c.kill('SIGTERM');
      const timer = setTimeout(() => c.kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(timer);
    }
  }
  await provisioner?.close();
  await temp.cleanup();
});

async function startEngine(modelPath: string): Promise<{ base: string; child: ChildProcess; stderr: () => string }> {
  const port = await findFreePort();
  const child = spawn(
    binary,
    ['-m', modelPath, '--host', '127.0.0.1', '--port', String(port), '-c', '256', '-np', '1', '--no-webui'],
    {
      env: scrubEngineEnv(process.env),
      stdio: ['ignore', 'ignore', 'pipe'],
    },
  );
  children.push(child);
  let stderr = '';
  child.stderr?.on('data', (d: Buffer) => {
    stderr = (stderr + d.toString()).slice(-8000);
  });
  return { base: `http://127.0.0.1:${port}`, child, stderr: () => stderr };
}

async function waitHealthy(base: string, child: ChildProcess, stderr: () => string): Promise<void> {
  const until = Date.now() + 60_000;
  while (Date.now() < until) {
    if (child.exitCode !== null) throw new Error(`llama-server exited ${child.exitCode} while loading:\n${stderr()}`);
    const status = await request(`${base}/health`).then(
      async (r) => {
        await r.body.dump();
        return r.statusCode;
      },
      () => 0,
    );
    if (status === 200) return;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`llama-server not healthy within 60 s:\n${stderr()}`);
}

interface CompletionReply {
  content: string;
  tokens: number[];
  tokens_predicted: number;
  stop_type: string;
}

async function complete(base: string, seed: number): Promise<CompletionReply> {
  const res = await request(`${base}/completion`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ prompt: 'Once upon a time', n_predict: 16, seed, cache_prompt: false, return_tokens: true }),
  });
  expect(res.statusCode).toBe(200);
  return (await res.body.json()) as CompletionReply;
}

describe('synthetic model in the real llama-server', () => {
  it('loads and generates 16 tokens, deterministically per seed', async () => {
    const { base, child, stderr } = await startEngine(model.local_path);
    await waitHealthy(base, child, stderr);
    const a = await complete(base, 42);
    expect(a.tokens_predicted).toBe(16);
    expect(a.tokens).toHaveLength(16);
    expect(a.stop_type).toBe('limit');
    expect(a.content.length).toBeGreaterThan(0);
    const b = await complete(base, 42);
    expect(b.tokens).toEqual(a.tokens);
    const props = (await request(`${base}/props`).then((r) => r.body.json())) as {
      model_path?: string;
      total_slots?: number;
    };
    expect(props.total_slots).toBe(1);
  });

  it('carries a chat template the engine reports, renders and can constrain with a JSON schema', async () => {
    const { base, child, stderr } = await startEngine(model.local_path);
    await waitHealthy(base, child, stderr);
    const props = (await request(`${base}/props`).then((r) => r.body.json())) as { chat_template?: string };
    expect(props.chat_template).toBe(SYNTHETIC_CHAT_TEMPLATE);
    const post = async (path: string, body: unknown): Promise<{ status: number; json: unknown }> => {
      const res = await request(`${base}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      return { status: res.statusCode, json: await res.body.json() };
    };
    const conversation = [
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'Hello there' },
      { role: 'assistant', content: 'Hi.' },
      { role: 'user', content: 'How are you?' },
    ];
    expect(await post('/apply-template', { messages: conversation })).toEqual({
      status: 200,
      json: { prompt: 'System: Be brief.\nUser: Hello there\nAssistant: Hi.\nUser: How are you?\nAssistant:' },
    });
    // The ChatML fallback made every response_format a 400 (the grammar is primed with the
    // generation prompt, which this template keeps empty).
    const schema = {
      type: 'object',
      properties: { answer: { type: 'string', enum: ['yes', 'no'] } },
      required: ['answer'],
      additionalProperties: false,
    };
    const chat = await post('/v1/chat/completions', {
      messages: conversation.slice(0, 2),
      max_tokens: 200,
      temperature: 0,
      seed: 42,
      response_format: { type: 'json_schema', json_schema: { name: 'answer', schema } },
    });
    expect(chat.status).toBe(200);
    const content = (chat.json as { choices: { message: { content: string }; finish_reason: string }[] }).choices[0]!;
    expect(content.finish_reason).toBe('stop');
    expect(JSON.parse(content.message.content)).toEqual({ answer: expect.stringMatching(/^(yes|no)$/) as unknown });
  });

  it('carries a tool-use template whose calls the engine parses and constrains: auto, required, streamed, and the follow-up turn', async () => {
    const { base, child, stderr } = await startEngine(model.local_path);
    await waitHealthy(base, child, stderr);
    const props = (await request(`${base}/props`).then((r) => r.body.json())) as {
      chat_template_tool_use?: string;
      chat_template_caps?: Record<string, boolean>;
    };
    expect(props.chat_template_tool_use).toBe(SYNTHETIC_TOOL_USE_TEMPLATE);
    const post = async (body: unknown): Promise<{ status: number; text: string }> => {
      const res = await request(`${base}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      return { status: res.statusCode, text: await res.body.text() };
    };
    const tools = [
      {
        type: 'function',
        function: {
          name: 'get_weather',
          parameters: {
            type: 'object',
            properties: { city: { type: 'string', enum: ['Paris', 'Tokyo'] } },
            required: ['city'],
          },
        },
      },
      // no properties (llama.cpp's grammar adds none unless additionalProperties says so): its arguments are `{}`
      { type: 'function', function: { name: 'get_time', parameters: { type: 'object', properties: {} } } },
    ];
    const ask = [{ role: 'user', content: 'What is the weather in Paris?' }];
    type Answer = {
      choices: {
        finish_reason: string;
        message: {
          content: string | null;
          tool_calls?: { id: string; function: { name: string; arguments: string } }[];
        };
      }[];
    };
    // A named function is the door's to honour (llama-server reads only the strings): 61-openai-door.md.
    for (const tool_choice of ['auto', 'required']) {
      const r = await post({ messages: ask, tools, tool_choice, max_tokens: 300, temperature: 0, seed: 5 });
      expect(r.status).toBe(200);
      const choice = (JSON.parse(r.text) as Answer).choices[0]!;
      expect(choice.finish_reason).toBe('tool_calls');
      expect(choice.message.tool_calls).toHaveLength(1);
      const call = choice.message.tool_calls![0]!;
      // The grammar wrote arguments that fit the schema of the tool it called, whichever it is.
      expect(JSON.parse(call.function.arguments)).toEqual(
        call.function.name === 'get_weather' ? { city: expect.stringMatching(/^(Paris|Tokyo)$/) as unknown } : {},
      );
      expect(call.function.name).toMatch(/^get_(weather|time)$/);
    }
    const streamed = await post({
      messages: ask,
      tools,
      tool_choice: 'required',
      max_tokens: 300,
      temperature: 0,
      seed: 5,
      stream: true,
    });
    expect(streamed.text).toContain('"tool_calls":[{"index":0');
    expect(streamed.text).toContain('"finish_reason":"tool_calls"');
    const call = { id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } };
    const followUp = await post({
      messages: [
        ...ask,
        { role: 'assistant', content: null, tool_calls: [call] },
        { role: 'tool', tool_call_id: 'call_1', content: 'sunny, 21 C' },
      ],
      tools,
      max_tokens: 12,
      temperature: 0,
      seed: 5,
    });
    const answer = (JSON.parse(followUp.text) as Answer).choices[0]!;
    expect(answer.message.tool_calls ?? []).toEqual([]);
    expect(answer.message.content).not.toBe('');
  });

  it('also loads the F16 variant', async () => {
    const f16 = await provisioner.ensure('synthetic:llama?type=f16');
    const { base, child, stderr } = await startEngine(f16.local_path);
    await waitHealthy(base, child, stderr);
    expect((await complete(base, 7)).tokens_predicted).toBe(16);
  });
});
