#!/usr/bin/env node
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadJsonSchemaFormat, parseCommandLine, USAGE } from './args.js';
import { CliError } from './errors.js';
import { statusReport, nodesTable } from './commands/status.js';
import { submit } from './commands/submit.js';
import { up } from './commands/up.js';

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');

async function main(argv: string[]): Promise<number> {
  const cmd = parseCommandLine(argv, process.env);
  if (cmd.command === 'help') {
    process.stdout.write(`${USAGE}\n`);
    return cmd.exitCode;
  }
  const controller = new AbortController();
  const onSignal = (): void => controller.abort();
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);

  switch (cmd.command) {
    case 'up':
      await up({
        repoRoot,
        config: resolve(cmd.config ?? join(repoRoot, 'requirements', 'cpu-dev.yaml')),
        addr: cmd.addr,
        token: cmd.token,
        cacheDir: process.env.LLORCH_CACHE_DIR ?? join(repoRoot, '.cache', 'llama-orch'),
        out: process.stdout,
        signal: controller.signal,
        readyTimeoutMs: 30 * 60_000,
      });
      return 0;
    case 'submit': {
      const { jsonSchemaFile, sampling, ...rest } = cmd.submit;
      const responseFormat = jsonSchemaFile === undefined ? undefined : await loadJsonSchemaFormat(jsonSchemaFile);
      await submit(cmd.target, {
        ...rest,
        sampling: responseFormat === undefined ? sampling : { ...sampling, response_format: responseFormat },
        out: process.stdout, err: process.stderr, signal: controller.signal,
      });
      return 0;
    }
    case 'status':
      process.stdout.write(`${await statusReport(cmd.target)}\n`);
      return 0;
    case 'nodes':
      process.stdout.write(`${await nodesTable(cmd.target)}\n`);
      return 0;
  }
}

main(process.argv.slice(2)).then(
  (code) => { process.exitCode = code; },
  (err: unknown) => {
    process.stderr.write(`llorch: ${err instanceof CliError ? err.message : err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exitCode = 1;
  },
);
