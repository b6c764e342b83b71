#!/usr/bin/env node
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { CliError } from './errors.js';
import type { Target } from './http.js';
import { statusReport, nodesTable } from './commands/status.js';
import { submit } from './commands/submit.js';
import { up } from './commands/up.js';

const USAGE = `llorch — llama-orch command line

  llorch up [--config requirements/cpu-dev.yaml] [--addr 127.0.0.1:8080]
        start orchestratord + one pool-managerd; Ctrl-C stops both (and their engines)
  llorch submit "<prompt>" [--model synthetic:llama] [--max-tokens 64] [--seed N] [--batch]
        admit a task and print its text as it streams
  llorch status        nodes, pools and the admission queue
  llorch nodes         registered nodes

Global: --url (env LLORCH_URL, default http://127.0.0.1:8080), --token (env LLORCH_API_TOKEN)`;

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');

async function main(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
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
      help: { type: 'boolean', short: 'h' },
    },
  });
  const [command, ...rest] = positionals;
  if (values.help || !command) {
    process.stdout.write(`${USAGE}\n`);
    return command || values.help ? 0 : 2;
  }
  const token = values.token ?? process.env.LLORCH_API_TOKEN;
  const target: Target = { url: values.url ?? process.env.LLORCH_URL ?? `http://${values.addr ?? '127.0.0.1:8080'}`, token };
  const controller = new AbortController();
  const onSignal = (): void => controller.abort();
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);

  switch (command) {
    case 'up':
      await up({
        repoRoot,
        config: resolve(values.config ?? join(repoRoot, 'requirements', 'cpu-dev.yaml')),
        addr: values.addr ?? '127.0.0.1:8080',
        token,
        cacheDir: process.env.LLORCH_CACHE_DIR ?? join(repoRoot, '.cache', 'llama-orch'),
        out: process.stdout,
        signal: controller.signal,
        readyTimeoutMs: 30 * 60_000,
      });
      return 0;
    case 'submit': {
      const prompt = rest.join(' ');
      if (!prompt) throw new CliError('submit needs a prompt: llorch submit "Write a haiku"');
      const maxTokens = Number(values['max-tokens'] ?? 64);
      const seed = values.seed === undefined ? undefined : Number(values.seed);
      if (!Number.isInteger(maxTokens) || maxTokens < 1) throw new CliError('--max-tokens must be a positive integer');
      if (seed !== undefined && !Number.isInteger(seed)) throw new CliError('--seed must be an integer');
      await submit(target, {
        prompt, model: values.model ?? 'synthetic:llama', maxTokens, seed, priority: values.batch ? 'batch' : 'interactive',
        deadlineMs: 120_000, out: process.stdout, err: process.stderr, signal: controller.signal,
      });
      return 0;
    }
    case 'status':
      process.stdout.write(`${await statusReport(target)}\n`);
      return 0;
    case 'nodes':
      process.stdout.write(`${await nodesTable(target)}\n`);
      return 0;
    default:
      throw new CliError(`unknown command '${command}'\n\n${USAGE}`);
  }
}

main(process.argv.slice(2)).then(
  (code) => { process.exitCode = code; },
  (err: unknown) => {
    process.stderr.write(`llorch: ${err instanceof CliError ? err.message : err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exitCode = 1;
  },
);
