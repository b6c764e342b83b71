import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  COMMAND_USAGE,
  CliError,
  USAGE,
  UsageError,
  loadJsonSchemaFormat,
  parseCommandLine,
  type CommandLine,
  type SubmitArgs,
} from './index.js';

const env = {};
function submitOf(argv: string[]): SubmitArgs {
  const cmd: CommandLine = parseCommandLine(argv, env);
  if (cmd.command !== 'submit') throw new Error(`parsed as ${cmd.command}`);
  return cmd.submit;
}

describe('parseCommandLine: submit', () => {
  it("defaults to a chat message with the engine's sampling", () => {
    expect(submitOf(['submit', 'Write', 'a', 'haiku'])).toEqual({
      text: 'Write a haiku',
      raw: false,
      system: undefined,
      model: 'synthetic',
      maxTokens: 64,
      seed: undefined,
      priority: 'interactive',
      sampling: {},
      jsonSchemaFile: undefined,
    });
  });

  it('takes --raw, --system, sampling flags, repeated --stop and --json-schema', () => {
    expect(
      submitOf([
        'submit',
        'hi',
        '--system',
        'Be brief.',
        '--temperature',
        '0.2',
        '--top-p',
        '0.9',
        '--stop',
        '\n\n',
        '--stop',
        'END',
        '--json-schema',
        'answer.json',
        '--seed',
        '7',
        '--max-tokens',
        '12',
        '--batch',
        '--model',
        'tiny',
      ]),
    ).toEqual({
      text: 'hi',
      raw: false,
      system: 'Be brief.',
      model: 'tiny',
      maxTokens: 12,
      seed: 7,
      priority: 'batch',
      sampling: { temperature: 0.2, top_p: 0.9, stop: ['\n\n', 'END'] },
      jsonSchemaFile: 'answer.json',
    });
    expect(submitOf(['submit', '--raw', 'Once upon a time', '--temperature', '0'])).toMatchObject({
      text: 'Once upon a time',
      raw: true,
      sampling: { temperature: 0 },
    });
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
    expect(() => parseCommandLine(['submit', 'hi', '--temprature', '1'], env)).toThrow(
      new UsageError("unknown option '--temprature'", COMMAND_USAGE.submit),
    );
    expect(() => parseCommandLine(['frobnicate'], env)).toThrow("unknown command 'frobnicate'");
  });
});

describe('parseCommandLine: target and other commands', () => {
  it('takes the URL and token from flags, else the environment, else the default address', () => {
    expect(parseCommandLine(['status'], {})).toEqual({
      command: 'status',
      json: false,
      target: { url: 'http://127.0.0.1:8080', token: undefined },
    });
    expect(parseCommandLine(['nodes'], { LLORCH_URL: 'http://o:1', LLORCH_API_TOKEN: 't' })).toEqual({
      command: 'nodes',
      json: false,
      target: { url: 'http://o:1', token: 't' },
    });
    expect(
      parseCommandLine(['status', '--url', 'http://x:2', '--token', 'u'], {
        LLORCH_URL: 'http://o:1',
        LLORCH_API_TOKEN: 't',
      }),
    ).toEqual({
      command: 'status',
      json: false,
      target: { url: 'http://x:2', token: 'u' },
    });
    // global flags may come before the command
    expect(parseCommandLine(['--url', 'http://x:2', 'models', '--json'], {})).toEqual({
      command: 'models',
      json: true,
      target: { url: 'http://x:2', token: undefined },
    });
    expect(parseCommandLine(['up', '--addr', '0.0.0.0:9000'], {})).toMatchObject({
      command: 'up',
      addr: '0.0.0.0:9000',
      target: { url: 'http://0.0.0.0:9000' },
    });
  });

  it('answers --help, <command> --help and --version; no command is a usage error', () => {
    expect(parseCommandLine(['--help'], {})).toEqual({ command: 'help', text: USAGE });
    expect(parseCommandLine(['-h'], {})).toEqual({ command: 'help', text: USAGE });
    for (const c of [
      'up',
      'submit',
      'status',
      'nodes',
      'models',
      'load',
      'unload',
      'tasks',
      'task',
      'cancel',
      'drain',
      'reload',
    ] as const) {
      expect(parseCommandLine([c, '--help'], {})).toEqual({ command: 'help', text: COMMAND_USAGE[c] });
      expect(COMMAND_USAGE[c]).toMatch(new RegExp(`^usage: llorch ${c}\\b`));
    }
    expect(parseCommandLine(['--version'], {})).toEqual({ command: 'version' });
    expect(parseCommandLine(['-V'], {})).toEqual({ command: 'version' });
    expect(() => parseCommandLine([], {})).toThrow(new UsageError('missing command', USAGE));
  });

  it('takes --json on status, nodes, models, tasks, task and submit only', () => {
    expect(parseCommandLine(['status', '--json'], {})).toMatchObject({ command: 'status', json: true });
    expect(parseCommandLine(['nodes', '--json'], {})).toMatchObject({ command: 'nodes', json: true });
    expect(parseCommandLine(['submit', 'hi', '--json'], {})).toMatchObject({
      command: 'submit',
      json: true,
      submit: { text: 'hi' },
    });
    expect(() => parseCommandLine(['cancel', 't1', '--json'], {})).toThrow(
      new UsageError("unknown option '--json'", COMMAND_USAGE.cancel),
    );
    expect(() => parseCommandLine(['up', '--json'], {})).toThrow(UsageError);
    expect(() => parseCommandLine(['status', '--json=yes'], {})).toThrow('--json does not take a value');
    expect(() => parseCommandLine(['status', '--help=yes'], {})).toThrow('--help does not take a value');
  });

  it('parses up --replicas N (default 1: the one process of today) and --state-dir; a bad count names the flag', () => {
    expect(parseCommandLine(['up'], {})).toMatchObject({ command: 'up', replicas: 1, stateDir: undefined });
    expect(parseCommandLine(['up', '--replicas', '3', '--state-dir', '/tmp/s'], {})).toMatchObject({
      command: 'up',
      replicas: 3,
      stateDir: '/tmp/s',
    });
    expect(parseCommandLine(['up', '--replicas=1'], {})).toMatchObject({ replicas: 1 });
    for (const bad of ['0', '-1', '2.5', 'three', '17', '']) {
      expect(() => parseCommandLine(['up', `--replicas=${bad}`], {}), bad).toThrow(
        new CliError(`--replicas must be an integer from 1 to 16 (got '${bad}')`),
      );
    }
  });

  it('parses cancel, drain and reload with their arguments', () => {
    const target = { url: 'http://127.0.0.1:8080', token: undefined };
    expect(parseCommandLine(['cancel', 'task-1'], {})).toEqual({ command: 'cancel', target, taskId: 'task-1' });
    expect(parseCommandLine(['drain', 'p1'], {})).toEqual({
      command: 'drain',
      target,
      poolId: 'p1',
      deadlineMs: 30_000,
    });
    expect(parseCommandLine(['drain', 'p1', '--deadline-ms', '0'], {})).toMatchObject({ deadlineMs: 0 });
    const sha = 'a'.repeat(64);
    expect(
      parseCommandLine(['reload', 'p1', 'hf:org/repo/m.gguf', '--sha256', sha, '--deadline-ms', '5000'], {}),
    ).toEqual({
      command: 'reload',
      target,
      poolId: 'p1',
      modelRef: 'hf:org/repo/m.gguf',
      sha256: sha,
      deadlineMs: 5000,
    });
  });

  it('parses load and unload with a model and --node; unload takes --deadline-ms', () => {
    const target = { url: 'http://127.0.0.1:8080', token: undefined };
    expect(parseCommandLine(['load', 'hf:org/repo/m.gguf'], {})).toEqual({
      command: 'load',
      target,
      model: 'hf:org/repo/m.gguf',
      node: undefined,
    });
    expect(parseCommandLine(['load', 'qwen', '--node', 'gpu-2'], {})).toMatchObject({ model: 'qwen', node: 'gpu-2' });
    expect(parseCommandLine(['unload', 'qwen'], {})).toEqual({
      command: 'unload',
      target,
      model: 'qwen',
      node: undefined,
      deadlineMs: 30_000,
    });
    expect(parseCommandLine(['unload', 'qwen', '--node', 'n1', '--deadline-ms', '0'], {})).toMatchObject({
      node: 'n1',
      deadlineMs: 0,
    });
    expect(() => parseCommandLine(['load'], {})).toThrow(new UsageError('load needs <model>', COMMAND_USAGE.load));
    expect(() => parseCommandLine(['load', 'm', '--deadline-ms', '5'], {})).toThrow(
      new UsageError("unknown option '--deadline-ms'", COMMAND_USAGE.load),
    );
    expect(() => parseCommandLine(['unload', 'm', '--node', 'Bad Node'], {})).toThrow(
      new CliError("--node must be a node id ([a-z0-9][a-z0-9_.-]{0,127}; got 'Bad Node')"),
    );
  });

  it('parses tasks: filters, --limit (default 50) and --json; task <id> with --json', () => {
    const target = { url: 'http://127.0.0.1:8080', token: undefined };
    const none = { state: undefined, model: undefined, priority: undefined, since: undefined };
    expect(parseCommandLine(['tasks'], {})).toEqual({
      command: 'tasks',
      target,
      json: false,
      filters: none,
      limit: 50,
    });
    expect(
      parseCommandLine(
        ['tasks', '--state', 'running', '--model', 'qwen', '--priority', 'batch', '--limit', '500', '--json'],
        {},
      ),
    ).toEqual({
      command: 'tasks',
      target,
      json: true,
      filters: { ...none, state: 'running', model: 'qwen', priority: 'batch' },
      limit: 500,
    });
    expect(parseCommandLine(['task', 't-1'], {})).toEqual({ command: 'task', target, json: false, taskId: 't-1' });
    expect(parseCommandLine(['task', 't-1', '--json'], {})).toMatchObject({ json: true, taskId: 't-1' });
    expect(() => parseCommandLine(['task'], {})).toThrow(new UsageError('task needs <task-id>', COMMAND_USAGE.task));
    expect(() => parseCommandLine(['tasks', 'extra'], {})).toThrow(
      new UsageError("unexpected argument 'extra'", COMMAND_USAGE.tasks),
    );
    expect(() => parseCommandLine(['tasks', '--pool', 'p1'], {})).toThrow(
      new UsageError("unknown option '--pool'", COMMAND_USAGE.tasks),
    );
  });

  it('takes --since as an age back from now, ms since the epoch or an ISO-8601 time with offset', () => {
    const now = () => Date.parse('2026-01-01T12:00:00Z');
    const since = (value: string): number | undefined => {
      const cmd = parseCommandLine(['tasks', `--since=${value}`], {}, now);
      if (cmd.command !== 'tasks') throw new Error(`parsed as ${cmd.command}`);
      return cmd.filters.since;
    };
    expect(since('30s')).toBe(now() - 30_000);
    expect(since('10m')).toBe(now() - 600_000);
    expect(since('2h')).toBe(now() - 7_200_000);
    expect(since('1d')).toBe(now() - 86_400_000);
    expect(since('1767225600000')).toBe(1_767_225_600_000);
    expect(since('2026-01-01T09:00:00Z')).toBe(Date.parse('2026-01-01T09:00:00Z'));
    expect(since('2026-01-01T09:00:00.250+02:00')).toBe(Date.parse('2026-01-01T07:00:00.250Z'));
    for (const bad of ['yesterday', '10 m', '-5', '2026-01-01', '2026-01-01T09:00:00', '2026-13-40T99:00:00Z'])
      expect(() => since(bad), bad).toThrow(
        new CliError(
          `--since must be an age (30s, 10m, 2h, 1d), ms since the epoch or an ISO-8601 time with offset (got '${bad}')`,
        ),
      );
  });

  it('names the tasks flag whose value is wrong (exit 1, not a 400 from orchestratord)', () => {
    expect(() => parseCommandLine(['tasks', '--state', 'done'], {})).toThrow(
      new CliError("--state must be one of queued, running, ended (got 'done')"),
    );
    expect(() => parseCommandLine(['tasks', '--priority', 'high'], {})).toThrow(
      new CliError("--priority must be interactive or batch (got 'high')"),
    );
    expect(() => parseCommandLine(['tasks', '--model', ''], {})).toThrow(
      new CliError('--model must be 1 to 512 characters'),
    );
    for (const bad of ['0', '10001', '2.5', 'all'])
      expect(() => parseCommandLine(['tasks', `--limit=${bad}`], {}), bad).toThrow(
        new CliError(`--limit must be an integer from 1 to 10000 (got '${bad}')`),
      );
  });

  it('names what is missing or extra (usage, exit 2) and bad values (exit 1)', () => {
    expect(() => parseCommandLine(['cancel'], {})).toThrow(
      new UsageError('cancel needs <task-id>', COMMAND_USAGE.cancel),
    );
    expect(() => parseCommandLine(['reload', 'p1'], {})).toThrow(
      new UsageError('reload needs <model-ref>', COMMAND_USAGE.reload),
    );
    expect(() => parseCommandLine(['drain', 'p1', 'p2'], {})).toThrow(
      new UsageError("unexpected argument 'p2'", COMMAND_USAGE.drain),
    );
    expect(() => parseCommandLine(['status', 'extra'], {})).toThrow("unexpected argument 'extra'");
    expect(() => parseCommandLine(['status', '--url'], {})).toThrow(
      new UsageError('--url needs a value', COMMAND_USAGE.status),
    );
    expect(() => parseCommandLine(['--frob'], {})).toThrow(new UsageError("unknown option '--frob'", USAGE));
    const bad = (argv: string[]): CliError => {
      try {
        parseCommandLine(argv, {});
      } catch (err) {
        return err as CliError;
      }
      throw new Error('parsed');
    };
    expect(bad(['drain', 'p1', '--deadline-ms=-1'])).toMatchObject({
      exitCode: 1,
      message: '--deadline-ms must be an integer from 0 to 3600000',
    });
    expect(bad(['reload', 'p1', 'm', '--sha256', 'XYZ'])).toMatchObject({
      exitCode: 1,
      message: '--sha256 must be 64 lowercase hex digits',
    });
    expect(bad(['frob']).exitCode).toBe(2);
    expect((bad(['reload', 'p1']) as UsageError).usage).toBe(COMMAND_USAGE.reload);
  });
});

describe('loadJsonSchemaFormat', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'llorch-cli-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("wraps the file's schema as a json_schema response_format named after the file", async () => {
    const schema = { type: 'object', properties: { answer: { type: 'string' } }, required: ['answer'] };
    await writeFile(join(dir, 'my answer.schema.json'), JSON.stringify(schema));
    await expect(loadJsonSchemaFormat(join(dir, 'my answer.schema.json'))).resolves.toEqual({
      type: 'json_schema',
      json_schema: { name: 'my_answer_schema', schema },
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
