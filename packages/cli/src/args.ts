import { readFile } from 'node:fs/promises';
import { basename, extname } from 'node:path';
import { parseArgs } from 'node:util';
import { SamplingSchema, formatIssues, type ResponseFormat, type Sampling } from '@llama-orch/contracts';
import { CliError } from './errors.js';
import type { Target } from './http.js';

export const USAGE = `llorch — llama-orch command line

  llorch up [--config requirements/cpu-dev.yaml] [--addr 127.0.0.1:8080]
        start orchestratord + one pool-managerd; Ctrl-C stops both (and their engines)
  llorch submit "<message>" [--system "<text>"] [--raw] [--model synthetic:llama] [--max-tokens 64]
        [--seed N] [--temperature T] [--top-p P] [--stop S]... [--json-schema FILE] [--batch]
        send a chat message (rendered with the model's chat template) and print the answer as it
        streams; --raw sends the text as a plain completion prompt instead
  llorch status        nodes, pools and the admission queue
  llorch nodes         registered nodes

Global: --url (env LLORCH_URL, default http://127.0.0.1:8080), --token (env LLORCH_API_TOKEN)`;

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
  | { command: 'help'; exitCode: number }
  | { command: 'up'; target: Target; config: string | undefined; addr: string; token: string | undefined }
  | { command: 'submit'; target: Target; submit: SubmitArgs }
  | { command: 'status' | 'nodes'; target: Target };

/**
 * Parses argv (without `node` and the script) into one command; every mistake is a CliError that
 * names the flag, so a typo never reaches orchestratord as a 400.
 */
export function parseCommandLine(argv: string[], env: Record<string, string | undefined>): CommandLine {
  let parsed: ReturnType<typeof parse>;
  try {
    parsed = parse(argv);
  } catch (err) {
    throw new CliError(`${(err as Error).message}\n\n${USAGE}`);
  }
  const { values, positionals } = parsed;
  const [command, ...rest] = positionals;
  if (values.help || !command) return { command: 'help', exitCode: command || values.help ? 0 : 2 };
  const token = values.token ?? env.LLORCH_API_TOKEN;
  const target: Target = { url: values.url ?? env.LLORCH_URL ?? `http://${values.addr ?? '127.0.0.1:8080'}`, token };
  switch (command) {
    case 'up':
      return { command, target, config: values.config, addr: values.addr ?? '127.0.0.1:8080', token };
    case 'status':
    case 'nodes':
      return { command, target };
    case 'submit':
      return { command, target, submit: submitArgs(values, rest.join(' ')) };
    default:
      throw new CliError(`unknown command '${command}'\n\n${USAGE}`);
  }
}

function parse(argv: string[]) {
  return parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      url: { type: 'string' },
      token: { type: 'string' },
      config: { type: 'string' },
      addr: { type: 'string' },
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
      help: { type: 'boolean', short: 'h' },
    },
  });
}

function submitArgs(values: ReturnType<typeof parse>['values'], text: string): SubmitArgs {
  const raw = values.raw ?? false;
  if (!text) throw new CliError(`submit needs a ${raw ? 'prompt' : 'message'}: llorch submit "Write a haiku"`);
  if (raw && values.system !== undefined) throw new CliError('--system applies to chat messages; drop --raw or --system');
  const maxTokens = Number(values['max-tokens'] ?? 64);
  if (!Number.isInteger(maxTokens) || maxTokens < 1) throw new CliError('--max-tokens must be a positive integer');
  const seed = values.seed === undefined ? undefined : Number(values.seed);
  if (seed !== undefined && !Number.isInteger(seed)) throw new CliError('--seed must be an integer');
  const candidate: Record<string, unknown> = {};
  if (values.temperature !== undefined) candidate.temperature = flagNumber('--temperature', values.temperature);
  if (values['top-p'] !== undefined) candidate.top_p = flagNumber('--top-p', values['top-p']);
  if (values.stop !== undefined && values.stop.length > 0) candidate.stop = values.stop;
  const sampling = SamplingSchema.safeParse(candidate);
  if (!sampling.success) throw new CliError(flagNames(formatIssues(sampling.error)));
  return {
    text, raw, system: values.system, model: values.model ?? 'synthetic:llama', maxTokens, seed,
    priority: values.batch ? 'batch' : 'interactive', sampling: sampling.data, jsonSchemaFile: values['json-schema'],
  };
}

function flagNumber(flag: string, value: string): number {
  const n = Number(value);
  if (value.trim() === '' || !Number.isFinite(n)) throw new CliError(`${flag} must be a number (got '${value}')`);
  return n;
}

/** Zod speaks in field names (`top_p: …`); the user typed flags (`--top-p: …`). */
function flagNames(issues: string): string {
  return issues.replace(/^(temperature|top_p|stop)(\[\d+\])?:/gm, (_, f: string, i: string | undefined) => `--${f.replace('_', '-')}${i ?? ''}:`);
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
  if (typeof schema !== 'object' || schema === null || Array.isArray(schema)) throw new CliError(`--json-schema: ${path} must hold a JSON Schema object`);
  const name = basename(path, extname(path)).replace(/[^A-Za-z0-9_-]/g, '_').slice(0, 64) || 'schema';
  return { type: 'json_schema', json_schema: { name, schema: schema as Record<string, unknown> } };
}
