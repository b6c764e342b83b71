import { readFile } from 'node:fs/promises';
import { basename, extname } from 'node:path';
import { parseArgs, type ParseArgsConfig } from 'node:util';
import {
  NodeIdSchema,
  SamplingSchema,
  TaskStateSchema,
  formatIssues,
  type ResponseFormat,
  type Sampling,
} from '@llama-orch/contracts';
import type { TaskFilters } from './commands/tasks.js';
import { CliError, UsageError } from './errors.js';
import type { Target } from './http.js';
import { COMMANDS, COMMAND_USAGE, USAGE, type CommandName } from './usage.js';

export { USAGE, COMMAND_USAGE } from './usage.js';

/** What `llorch submit` was asked to send (before the JSON schema file is read). */
export interface SubmitArgs {
  /** The user message, or the raw prompt with `raw`. */
  text: string;
  /** `true`: a plain completion of `text`; `false` (default): a chat turn. */
  raw: boolean;
  /** System message put before the user message (chat only). */
  system: string | undefined;
  model: string;
  maxTokens: number;
  seed: number | undefined;
  priority: 'interactive' | 'batch';
  /** temperature, top_p and stop from the flags (validated); response_format comes from `jsonSchemaFile`. */
  sampling: Sampling;
  /** Path of a JSON Schema the answer must match (`--json-schema`). */
  jsonSchemaFile: string | undefined;
}

export type CommandLine =
  | { command: 'help'; text: string }
  | { command: 'version' }
  | {
      command: 'up';
      target: Target;
      config: string | undefined;
      addr: string;
      token: string | undefined;
      replicas: number;
      stateDir: string | undefined;
    }
  | { command: 'submit'; target: Target; submit: SubmitArgs; json: boolean }
  | { command: 'status' | 'nodes' | 'models'; target: Target; json: boolean }
  | { command: 'tasks'; target: Target; json: boolean; filters: TaskFilters; limit: number }
  | { command: 'task'; target: Target; json: boolean; taskId: string }
  | { command: 'cancel'; target: Target; taskId: string }
  | { command: 'drain'; target: Target; poolId: string; deadlineMs: number }
  | {
      command: 'reload';
      target: Target;
      poolId: string;
      modelRef: string;
      sha256: string | undefined;
      deadlineMs: number;
    }
  | { command: 'load'; target: Target; model: string; node: string | undefined }
  | { command: 'unload'; target: Target; model: string; node: string | undefined; deadlineMs: number };

type Options = NonNullable<ParseArgsConfig['options']>;

const TARGET: Options = { url: { type: 'string' }, token: { type: 'string' }, help: { type: 'boolean', short: 'h' } };
const JSON_OPT: Options = { json: { type: 'boolean' } };
const DEADLINE: Options = { 'deadline-ms': { type: 'string' } };
const NODE: Options = { node: { type: 'string' } };

/** Each command's flags; anything else is a usage error naming the flag (strict parsing). */
const COMMAND_OPTIONS: Readonly<Record<CommandName, Options>> = {
  up: {
    config: { type: 'string' },
    addr: { type: 'string' },
    token: { type: 'string' },
    replicas: { type: 'string' },
    'state-dir': { type: 'string' },
    help: { type: 'boolean', short: 'h' },
  },
  submit: {
    ...TARGET,
    ...JSON_OPT,
    model: { type: 'string' },
    'max-tokens': { type: 'string' },
    seed: { type: 'string' },
    batch: { type: 'boolean' },
    raw: { type: 'boolean' },
    system: { type: 'string' },
    temperature: { type: 'string' },
    'top-p': { type: 'string' },
    stop: { type: 'string', multiple: true },
    'json-schema': { type: 'string' },
  },
  status: { ...TARGET, ...JSON_OPT },
  nodes: { ...TARGET, ...JSON_OPT },
  models: { ...TARGET, ...JSON_OPT },
  tasks: {
    ...TARGET,
    ...JSON_OPT,
    state: { type: 'string' },
    model: { type: 'string' },
    priority: { type: 'string' },
    since: { type: 'string' },
    limit: { type: 'string' },
  },
  task: { ...TARGET, ...JSON_OPT },
  cancel: { ...TARGET },
  drain: { ...TARGET, ...DEADLINE },
  reload: { ...TARGET, ...DEADLINE, sha256: { type: 'string' } },
  load: { ...TARGET, ...NODE },
  unload: { ...TARGET, ...NODE, ...DEADLINE },
};

/** Flags before any command: `llorch --version`, `llorch --help`, `llorch --url U status`. */
const TOP_OPTIONS: Options = { ...TARGET, version: { type: 'boolean', short: 'V' } };
const ALL_OPTIONS: Options = Object.assign({}, TOP_OPTIONS, ...Object.values(COMMAND_OPTIONS)) as Options;

type Values = Record<string, string | boolean | Array<string | boolean> | undefined>;

/**
 * Parses argv (without `node` and the script) into one command. A wrong command line is a
 * {@link UsageError} (exit 2) that names the flag or argument; a bad flag value is a CliError
 * (exit 1) that names the flag, so a typo never reaches orchestratord as a 400.
 */
export function parseCommandLine(
  argv: string[],
  env: Record<string, string | undefined>,
  /** The clock a relative `--since 10m` counts back from. @default Date.now */
  now: () => number = Date.now,
): CommandLine {
  // The command is the first positional; options of any command are skipped with their values.
  const scan = parseArgs({ args: argv, options: ALL_OPTIONS, strict: false, allowPositionals: true, tokens: true });
  const first = scan.tokens.find((t) => t.kind === 'positional');
  if (first === undefined) {
    const top = strictParse(argv, TOP_OPTIONS, USAGE, false);
    if (top.values.help === true) return { command: 'help', text: USAGE };
    if (top.values.version === true) return { command: 'version' };
    throw new UsageError('missing command', USAGE);
  }
  const command = first.value;
  if (!isCommand(command)) throw new UsageError(`unknown command '${command}'`, USAGE);
  const usage = COMMAND_USAGE[command];
  const rest = [...argv.slice(0, first.index), ...argv.slice(first.index + 1)];
  const { values, positionals } = strictParse(rest, COMMAND_OPTIONS[command], usage, true);
  if (values.help === true) return { command: 'help', text: usage };
  const str = (name: string): string | undefined => values[name] as string | undefined;
  const token = str('token') ?? env.LLORCH_API_TOKEN;
  const target: Target = { url: str('url') ?? env.LLORCH_URL ?? 'http://127.0.0.1:8080', token };
  const json = values.json === true;
  const args = (names: string[]): string[] => {
    if (positionals.length < names.length)
      throw new UsageError(
        `${command} needs ${names
          .slice(positionals.length)
          .map((n) => `<${n}>`)
          .join(' ')}`,
        usage,
      );
    if (positionals.length > names.length)
      throw new UsageError(`unexpected argument '${positionals[names.length]}'`, usage);
    return positionals;
  };
  switch (command) {
    case 'up': {
      const addr = str('addr') ?? '127.0.0.1:8080';
      args([]);
      return {
        command,
        target: { url: `http://${addr}`, token },
        config: str('config'),
        addr,
        token,
        replicas: replicaCount(str('replicas')),
        stateDir: str('state-dir'),
      };
    }
    case 'submit':
      return { command, target, json, submit: submitArgs(values, positionals.join(' ')) };
    case 'status':
    case 'nodes':
    case 'models':
      args([]);
      return { command, target, json };
    case 'tasks':
      args([]);
      return { command, target, json, filters: taskFilters(values, now), limit: taskLimit(str('limit')) };
    case 'task':
      return { command, target, json, taskId: args(['task-id'])[0]! };
    case 'cancel':
      return { command, target, taskId: args(['task-id'])[0]! };
    case 'drain':
      return { command, target, poolId: args(['pool-id'])[0]!, deadlineMs: deadlineMs(str('deadline-ms')) };
    case 'reload': {
      const [poolId, modelRef] = args(['pool-id', 'model-ref']);
      const sha256 = str('sha256');
      if (sha256 !== undefined && !/^[0-9a-f]{64}$/.test(sha256))
        throw new CliError('--sha256 must be 64 lowercase hex digits');
      return {
        command,
        target,
        poolId: poolId!,
        modelRef: modelRef!,
        sha256,
        deadlineMs: deadlineMs(str('deadline-ms')),
      };
    }
    case 'load':
      return { command, target, model: args(['model'])[0]!, node: nodeId(str('node')) };
    case 'unload':
      return {
        command,
        target,
        model: args(['model'])[0]!,
        node: nodeId(str('node')),
        deadlineMs: deadlineMs(str('deadline-ms')),
      };
  }
}

/** `--node`: a node id as nodes register it, checked here so a typo is not a 400 from orchestratord. */
function nodeId(value: string | undefined): string | undefined {
  if (value !== undefined && !NodeIdSchema.safeParse(value).success)
    throw new CliError(`--node must be a node id ([a-z0-9][a-z0-9_.-]{0,127}; got '${value}')`);
  return value;
}

function isCommand(name: string): name is CommandName {
  return (COMMANDS as readonly string[]).includes(name);
}

/** node:util parseArgs in strict mode, its errors turned into one-line UsageErrors. */
function strictParse(
  args: string[],
  options: Options,
  usage: string,
  allowPositionals: boolean,
): { values: Values; positionals: string[] } {
  try {
    return parseArgs({ args, options, strict: true, allowPositionals });
  } catch (err) {
    const { code, message } = err as { code?: string; message: string };
    const quoted = /'([^']+)'/.exec(message)?.[1] ?? '';
    if (code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION') throw new UsageError(`unknown option '${quoted}'`, usage);
    if (code === 'ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL') throw new UsageError(`unexpected argument '${quoted}'`, usage);
    if (code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE') {
      const flag = /--[\w-]+/.exec(quoted)?.[0] ?? quoted.split(' ')[0] ?? quoted;
      throw new UsageError(
        /does not take/.test(message) ? `${flag} does not take a value` : `${flag} needs a value`,
        usage,
      );
    }
    throw new UsageError(message.split('\n')[0] ?? message, usage);
  }
}

/** Most replicas `llorch up` starts on one host (each is a Node process of its own). */
export const MAX_REPLICAS = 16;

function replicaCount(value: string | undefined): number {
  if (value === undefined) return 1;
  const n = Number(value);
  if (!/^\d+$/.test(value) || n < 1 || n > MAX_REPLICAS)
    throw new CliError(`--replicas must be an integer from 1 to ${MAX_REPLICAS} (got '${value}')`);
  return n;
}

/** Most tasks `llorch tasks --limit` lists (pages of up to 500 are followed to get there). */
export const MAX_TASK_LIMIT = 10_000;

function taskLimit(value: string | undefined): number {
  if (value === undefined) return 50;
  const n = Number(value);
  if (!/^\d+$/.test(value) || n < 1 || n > MAX_TASK_LIMIT)
    throw new CliError(`--limit must be an integer from 1 to ${MAX_TASK_LIMIT} (got '${value}')`);
  return n;
}

const SINCE_UNIT_MS: Readonly<Record<string, number>> = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/**
 * `--state`, `--model`, `--priority` and `--since` checked here, so a typo is not a 400 from
 * orchestratord. `--since` is what the API takes (ms since the epoch, or an ISO-8601 timestamp
 * with its offset) or an age back from now (`30s`, `10m`, `2h`, `1d`), sent as ms since the epoch.
 */
function taskFilters(values: Values, now: () => number): TaskFilters {
  const str = (name: string): string | undefined => values[name] as string | undefined;
  const state = str('state');
  if (state !== undefined && !TaskStateSchema.safeParse(state).success)
    throw new CliError(`--state must be one of ${TaskStateSchema.options.join(', ')} (got '${state}')`);
  const priority = str('priority');
  if (priority !== undefined && priority !== 'interactive' && priority !== 'batch')
    throw new CliError(`--priority must be interactive or batch (got '${priority}')`);
  const model = str('model');
  if (model !== undefined && (model.length === 0 || model.length > 512))
    throw new CliError('--model must be 1 to 512 characters');
  const since = str('since');
  return {
    state: state as TaskFilters['state'],
    model,
    priority,
    since: since === undefined ? undefined : sinceMs(since, now),
  };
}

function sinceMs(value: string, now: () => number): number {
  const age = /^(\d+)([smhd])$/.exec(value);
  if (age !== null) return Math.max(0, now() - Number(age[1]) * SINCE_UNIT_MS[age[2]!]!);
  if (/^\d+$/.test(value)) return Number(value);
  // an ISO-8601 date and time with its offset (Z or ±hh:mm), as the API takes it
  const at = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:\d{2})$/.test(value)
    ? Date.parse(value)
    : NaN;
  if (Number.isNaN(at))
    throw new CliError(
      `--since must be an age (30s, 10m, 2h, 1d), ms since the epoch or an ISO-8601 time with offset (got '${value}')`,
    );
  return at;
}

function deadlineMs(value: string | undefined): number {
  if (value === undefined) return 30_000;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0 || n > 3_600_000)
    throw new CliError('--deadline-ms must be an integer from 0 to 3600000');
  return n;
}

function submitArgs(all: Values, text: string): SubmitArgs {
  const values = all as {
    raw?: boolean;
    system?: string;
    'max-tokens'?: string;
    seed?: string;
    temperature?: string;
    'top-p'?: string;
    stop?: string[];
    model?: string;
    batch?: boolean;
    'json-schema'?: string;
  };
  const raw = values.raw ?? false;
  if (!text)
    throw new UsageError(
      `submit needs a ${raw ? 'prompt' : 'message'}: llorch submit "Write a haiku"`,
      COMMAND_USAGE.submit,
    );
  if (raw && values.system !== undefined)
    throw new UsageError('--system applies to chat messages; drop --raw or --system', COMMAND_USAGE.submit);
  const maxTokens = Number(values['max-tokens'] ?? 64);
  if (!Number.isInteger(maxTokens) || maxTokens < 1) throw new CliError('--max-tokens must be a positive integer');
  const seed = values.seed === undefined ? undefined : Number(values.seed);
  if (seed !== undefined && !Number.isInteger(seed)) throw new CliError('--seed must be an integer');
  const candidate: Record<string, unknown> = {};
  if (values.temperature !== undefined) candidate.temperature = flagNumber('--temperature', values.temperature);
  if (values['top-p'] !== undefined) candidate.top_p = flagNumber('--top-p', values['top-p']);
  if (values.stop !== undefined && values.stop.length > 0) candidate.stop = values.stop;
  const sampling = SamplingSchema.safeParse(candidate);
  if (!sampling.success) throw new CliError(flagNames(formatIssues(sampling.error)).split('\n').join('; '));
  return {
    text,
    raw,
    system: values.system,
    model: values.model ?? 'synthetic',
    maxTokens,
    seed,
    priority: values.batch === true ? 'batch' : 'interactive',
    sampling: sampling.data,
    jsonSchemaFile: values['json-schema'],
  };
}

function flagNumber(flag: string, value: string): number {
  const n = Number(value);
  if (value.trim() === '' || !Number.isFinite(n)) throw new CliError(`${flag} must be a number (got '${value}')`);
  return n;
}

/** Zod speaks in field names (`top_p: …`); the user typed flags (`--top-p: …`). */
function flagNames(issues: string): string {
  return issues.replace(
    /^(temperature|top_p|stop)(\[\d+\])?:/gm,
    (_, f: string, i: string | undefined) => `--${f.replace('_', '-')}${i ?? ''}:`,
  );
}

/**
 * Reads `--json-schema FILE` into the response_format the engine's grammar enforces. The schema's
 * name is the file's base name (OpenAI requires one: [A-Za-z0-9_-], at most 64).
 */
export async function loadJsonSchemaFormat(path: string): Promise<ResponseFormat> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    throw new CliError(`--json-schema: cannot read ${path}: ${(err as Error).message}`);
  }
  let schema: unknown;
  try {
    schema = JSON.parse(text);
  } catch (err) {
    throw new CliError(`--json-schema: ${path} is not JSON: ${(err as Error).message}`);
  }
  if (typeof schema !== 'object' || schema === null || Array.isArray(schema))
    throw new CliError(`--json-schema: ${path} must hold a JSON Schema object`);
  const name =
    basename(path, extname(path))
      .replace(/[^A-Za-z0-9_-]/g, '_')
      .slice(0, 64) || 'schema';
  return { type: 'json_schema', json_schema: { name, schema: schema as Record<string, unknown> } };
}
