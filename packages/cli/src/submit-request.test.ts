import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { PassThrough } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { TaskRequestSchema, formatSseFrame } from '@llama-orch/contracts';
import { submit, taskBody, type SubmitOptions } from './index.js';
import { fixtureOrchestrator, type FixtureOrchestrator } from './testing/fixture-orchestrator.js';

const FRAMES = [
  formatSseFrame(1, { event: 'started', data: { queue_position: 0, predicted_start_ms: 5 } }),
  formatSseFrame(2, { event: 'token', data: { t: 'Hi', i: 0 } }),
  formatSseFrame(3, {
    event: 'end',
    data: {
      tokens_out: 1,
      decode_ms: 2,
      decode_time_ms: 2,
      pool_id: 'p1',
      node_id: 'n1',
      engine_version: 'b1',
      prompt_tokens: 40,
      cached_tokens: 32,
      finish_reason: 'stop',
    },
  }),
];
const TOKEN = 'secret-token-0123456789';

let fixture: FixtureOrchestrator;
afterEach(async () => {
  await fixture?.close();
});

function quiet(): NodeJS.WritableStream {
  return new PassThrough().resume();
}

const base = (over: Partial<SubmitOptions>): SubmitOptions => ({
  text: 'Write a haiku',
  model: 'synthetic:llama',
  maxTokens: 16,
  seed: undefined,
  priority: 'interactive',
  out: quiet(),
  err: quiet(),
  ...over,
});

describe('the task llorch submit sends', () => {
  it('is a chat turn by default: system + user messages, sampling as given, defaults left to orchestratord', async () => {
    fixture = await fixtureOrchestrator(FRAMES, { token: TOKEN });
    const err = new PassThrough();
    let errText = '';
    err.on('data', (c: Buffer) => {
      errText += c.toString();
    });
    await submit(
      { url: fixture.url, token: TOKEN },
      base({
        system: 'Answer in English.',
        seed: 3,
        sampling: { temperature: 0.5, top_p: 0.9, stop: ['END'] },
        err,
      }),
    );
    expect(fixture.bodies).toEqual([
      {
        model_ref: 'synthetic:llama',
        priority: 'interactive',
        max_tokens: 16,
        workload: 'chat',
        seed: 3,
        messages: [
          { role: 'system', content: 'Answer in English.' },
          { role: 'user', content: 'Write a haiku' },
        ],
        sampling: { temperature: 0.5, top_p: 0.9, stop: ['END'] },
      },
    ]);
    // what the CLI sends is a valid /v2 body as orchestratord parses it
    expect(TaskRequestSchema.safeParse(fixture.bodies[0]).success).toBe(true);
    expect(errText).toContain('prompt 40 tokens (32 cached), finish stop');
  });

  it('sends a plain completion prompt with raw, and no sampling object when none was asked for', () => {
    const body = taskBody(base({ raw: true, text: 'Once upon a time' }));
    expect(body).toEqual({
      model_ref: 'synthetic:llama',
      priority: 'interactive',
      max_tokens: 16,
      workload: 'completion',
      prompt: 'Once upon a time',
    });
    expect(TaskRequestSchema.safeParse(body).success).toBe(true);
    expect(() => taskBody(base({ raw: true, system: 'x' }))).toThrow(/system message needs a chat task/);
  });
});

// The built command line end to end (argv → file → body), against the fixture: rebuild first.
describe('llorch submit (built dist/main.js)', () => {
  const main = join(dirname(fileURLToPath(import.meta.url)), '..', 'dist', 'main.js');
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'llorch-cli-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('sends --json-schema as response_format json_schema with the other flags, prints the answer', async () => {
    fixture = await fixtureOrchestrator(FRAMES, { token: TOKEN });
    const schema = { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] };
    await writeFile(join(dir, 'city.json'), JSON.stringify(schema));
    const r = await execa(
      'node',
      [
        main,
        'submit',
        'Name a city',
        '--system',
        'JSON only',
        '--temperature',
        '0',
        '--top-p',
        '1',
        '--stop',
        '}',
        '--json-schema',
        join(dir, 'city.json'),
        '--url',
        fixture.url,
        '--token',
        TOKEN,
      ],
      { reject: false },
    );
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stdout).toBe('Hi');
    expect(fixture.bodies).toEqual([
      {
        model_ref: 'synthetic',
        priority: 'interactive',
        max_tokens: 64,
        workload: 'chat',
        messages: [
          { role: 'system', content: 'JSON only' },
          { role: 'user', content: 'Name a city' },
        ],
        sampling: {
          temperature: 0,
          top_p: 1,
          stop: ['}'],
          response_format: { type: 'json_schema', json_schema: { name: 'city', schema } },
        },
      },
    ]);
  });

  it('exits 1 with one line naming the flag, before sending anything', async () => {
    fixture = await fixtureOrchestrator(FRAMES);
    const r = await execa('node', [main, 'submit', 'hi', '--temperature', '9', '--url', fixture.url], {
      reject: false,
    });
    expect(r.exitCode).toBe(1);
    expect(r.stderr).toMatch(/^llorch: --temperature: /);
    expect(fixture.bodies).toEqual([]);
  });
});
