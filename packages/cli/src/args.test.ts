import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CliError, loadJsonSchemaFormat, parseCommandLine, type CommandLine, type SubmitArgs } from './index.js';

const env = {};
function submitOf(argv: string[]): SubmitArgs {
  const cmd: CommandLine = parseCommandLine(argv, env);
  if (cmd.command !== 'submit') throw new Error(`parsed as ${cmd.command}`);
  return cmd.submit;
}

describe('parseCommandLine: submit', () => {
  it('defaults to a chat message with the engine\'s sampling', () => {
    expect(submitOf(['submit', 'Write', 'a', 'haiku'])).toEqual({
      text: 'Write a haiku', raw: false, system: undefined, model: 'synthetic:llama', maxTokens: 64, seed: undefined,
      priority: 'interactive', sampling: {}, jsonSchemaFile: undefined,
    });
  });

  it('takes --raw, --system, sampling flags, repeated --stop and --json-schema', () => {
    expect(submitOf(['submit', 'hi', '--system', 'Be brief.', '--temperature', '0.2', '--top-p', '0.9', '--stop', '\n\n', '--stop', 'END',
      '--json-schema', 'answer.json', '--seed', '7', '--max-tokens', '12', '--batch', '--model', 'tiny'])).toEqual({
      text: 'hi', raw: false, system: 'Be brief.', model: 'tiny', maxTokens: 12, seed: 7, priority: 'batch',
      sampling: { temperature: 0.2, top_p: 0.9, stop: ['\n\n', 'END'] }, jsonSchemaFile: 'answer.json',
    });
    expect(submitOf(['submit', '--raw', 'Once upon a time', '--temperature', '0'])).toMatchObject({ text: 'Once upon a time', raw: true, sampling: { temperature: 0 } });
  });

  it('names the flag when a value is out of range or not a number', () => {
    expect(() => submitOf(['submit', 'hi', '--temperature', '3'])).toThrow(/^--temperature: /);
    expect(() => submitOf(['submit', 'hi', '--top-p', '1.5'])).toThrow(/^--top-p: /);
    expect(() => submitOf(['submit', 'hi', '--top-p', 'high'])).toThrow("--top-p must be a number (got 'high')");
    expect(() => submitOf(['submit', 'hi', '--stop', ''])).toThrow(/^--stop\[0\]: /);
    expect(() => submitOf(['submit', 'hi', '--max-tokens', '0'])).toThrow('--max-tokens must be a positive integer');
    expect(() => submitOf(['submit', 'hi', '--seed', '1.5'])).toThrow('--seed must be an integer');
  });

  it('refuses a system message on a raw prompt, an empty message and unknown flags or commands', () => {
    expect(() => submitOf(['submit', '--raw', '--system', 'x', 'hi'])).toThrow(/--system applies to chat messages/);
    expect(() => submitOf(['submit'])).toThrow('submit needs a message');
    expect(() => submitOf(['submit', '--raw'])).toThrow('submit needs a prompt');
    expect(() => parseCommandLine(['submit', 'hi', '--temprature', '1'], env)).toThrow(CliError);
    expect(() => parseCommandLine(['frobnicate'], env)).toThrow("unknown command 'frobnicate'");
  });
});

describe('parseCommandLine: target and other commands', () => {
  it('takes the URL and token from flags, else the environment, else the default address', () => {
    expect(parseCommandLine(['status'], {})).toEqual({ command: 'status', target: { url: 'http://127.0.0.1:8080', token: undefined } });
    expect(parseCommandLine(['nodes'], { LLORCH_URL: 'http://o:1', LLORCH_API_TOKEN: 't' })).toEqual({ command: 'nodes', target: { url: 'http://o:1', token: 't' } });
    expect(parseCommandLine(['status', '--url', 'http://x:2', '--token', 'u'], { LLORCH_URL: 'http://o:1', LLORCH_API_TOKEN: 't' }))
      .toEqual({ command: 'status', target: { url: 'http://x:2', token: 'u' } });
    expect(parseCommandLine(['up', '--addr', '0.0.0.0:9000'], {})).toMatchObject({ command: 'up', addr: '0.0.0.0:9000', target: { url: 'http://0.0.0.0:9000' } });
  });

  it('prints usage for --help (exit 0) and for no command (exit 2)', () => {
    expect(parseCommandLine(['--help'], {})).toEqual({ command: 'help', exitCode: 0 });
    expect(parseCommandLine([], {})).toEqual({ command: 'help', exitCode: 2 });
  });
});

describe('loadJsonSchemaFormat', () => {
  let dir: string;
  beforeAll(async () => { dir = await mkdtemp(join(tmpdir(), 'llorch-cli-')); });
  afterAll(async () => { await rm(dir, { recursive: true, force: true }); });

  it('wraps the file\'s schema as a json_schema response_format named after the file', async () => {
    const schema = { type: 'object', properties: { answer: { type: 'string' } }, required: ['answer'] };
    await writeFile(join(dir, 'my answer.schema.json'), JSON.stringify(schema));
    await expect(loadJsonSchemaFormat(join(dir, 'my answer.schema.json'))).resolves.toEqual({
      type: 'json_schema', json_schema: { name: 'my_answer_schema', schema },
    });
  });

  it('reports a missing file, text that is not JSON and JSON that is not an object', async () => {
    await expect(loadJsonSchemaFormat(join(dir, 'absent.json'))).rejects.toThrow(/--json-schema: cannot read/);
    await writeFile(join(dir, 'bad.json'), '{ type: object');
    await expect(loadJsonSchemaFormat(join(dir, 'bad.json'))).rejects.toThrow(/is not JSON/);
    await writeFile(join(dir, 'list.json'), '[1, 2]');
    await expect(loadJsonSchemaFormat(join(dir, 'list.json'))).rejects.toThrow(/must hold a JSON Schema object/);
  });
});
