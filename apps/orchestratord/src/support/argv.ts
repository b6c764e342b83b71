import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { ORCHESTRATOR_ENV, OrchestratorConfigSchema } from '@llama-orch/contracts';

/** What main.ts does with its command line: start, or print and exit with `code`. */
export type ArgvOutcome = { action: 'run' } | { action: 'exit'; code: number; stdout?: string; stderr?: string };

/** `orchestratord --help`: configuration is the environment only; every variable with its default. */
export function usage(): string {
  const defaults = OrchestratorConfigSchema.safeParse({});
  const values: Record<string, unknown> = defaults.success ? defaults.data : {};
  const names = Object.keys(ORCHESTRATOR_ENV);
  const width = Math.max(...names.map((n) => n.length));
  const lines = Object.entries(ORCHESTRATOR_ENV).map(([env, key]) => {
    const d = values[key];
    return `  ${env.padEnd(width)}  ${key}${d === undefined ? '' : ` (default ${String(d)})`}`;
  });
  return `orchestratord — llama-orch control plane: admission, placement and streaming over the nodes' pools

usage: orchestratord [--help] [--version]

Configuration comes from the environment only, read once at start; every problem is reported in
one fatal log line and the process exits 1. Empty variables count as unset. A non-loopback
ORCHD_ADDR requires LLORCH_API_TOKEN.

${lines.join('\n')}

Logs: JSON lines (pino) on stdout. SIGTERM or SIGINT closes gracefully within 10 s; a second
signal exits at once.`;
}

/** The version in the package's package.json (two levels above dist/support/). */
export function packageVersion(): string {
  const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version?: unknown };
  return typeof pkg.version === 'string' ? pkg.version : '0.0.0';
}

/** `--help`/`-h` and `--version`/`-V` exit 0; any other argument is a usage error (exit 2). */
export function parseDaemonArgv(argv: readonly string[]): ArgvOutcome {
  let values: { help?: boolean; version?: boolean };
  try {
    ({ values } = parseArgs({ args: [...argv], strict: true, allowPositionals: false, options: { help: { type: 'boolean', short: 'h' }, version: { type: 'boolean', short: 'V' } } }));
  } catch (err) {
    const quoted = /'([^']+)'/.exec((err as Error).message)?.[1] ?? String(argv[0]);
    const what = (err as { code?: string }).code === 'ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL' ? 'unexpected argument' : 'unknown option';
    return { action: 'exit', code: 2, stderr: `orchestratord: ${what} '${quoted.split(' ')[0]}'\n\n${usage()}\n` };
  }
  if (values.help === true) return { action: 'exit', code: 0, stdout: `${usage()}\n` };
  if (values.version === true) return { action: 'exit', code: 0, stdout: `orchestratord ${packageVersion()}\n` };
  return { action: 'run' };
}
