import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

// Kept free of the daemon's imports: main.ts answers --help/--version before loading the bundle.

/** What main.ts does with its command line: start, or print and exit with `code`. */
export type ArgvOutcome = { action: 'run' } | { action: 'exit'; code: number; stdout?: string; stderr?: string };

export const USAGE = `pool-managerd — llama-orch node daemon: provisions llama.cpp engines and models for its pools,
supervises them and registers the node with orchestratord

usage: pool-managerd --config <file.yaml>
       pool-managerd --help | --version

  -c, --config FILE  the node's YAML config (node id and address, orchestrator URL, pools, supervision);
                     unknown keys are refused, every problem reported at once (fatal log line, exit 1);
                     relative paths in it resolve against its directory
  -h, --help         this help
  -V, --version      print the version

Environment:
  LLORCH_API_TOKEN   bearer token for this node's API and towards orchestratord (config api_token wins);
                     required when node.addr is not loopback
  LLORCH_CACHE_DIR   engine builds and models (wins over config cache_dir; default ~/.cache/llama-orch)
  LOG_LEVEL          pino level (default info)
  HF_TOKEN           Hugging Face token for gated hf: models

Logs: JSON lines on stdout. SIGTERM or SIGINT deregisters the node, stops the engines (SIGTERM, then
SIGKILL after the supervision stop timeout) and exits; a SIGTERM while stopping changes nothing, a
second SIGINT (Ctrl-C) exits at once with status 130.`;

/** The version in the package's package.json (two levels above dist/support/). */
export function packageVersion(): string {
  const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version?: unknown };
  return typeof pkg.version === 'string' ? pkg.version : '0.0.0';
}

/**
 * `--help`/`-h` and `--version`/`-V` exit 0; an unknown option, a stray argument or a missing
 * `--config` is a usage error (exit 2). `--config` itself is read by config.ts's parseArgv.
 */
export function parseDaemonArgv(argv: readonly string[]): ArgvOutcome {
  let values: { help?: boolean; version?: boolean; config?: string };
  try {
    ({ values } = parseArgs({
      args: [...argv], strict: true, allowPositionals: false,
      options: { help: { type: 'boolean', short: 'h' }, version: { type: 'boolean', short: 'V' }, config: { type: 'string', short: 'c' } },
    }));
  } catch (err) {
    const { code, message } = err as { code?: string; message: string };
    const quoted = /'([^']+)'/.exec(message)?.[1] ?? '';
    const flag = /--[\w-]+/.exec(quoted)?.[0] ?? quoted.split(' ')[0];
    const what = code === 'ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL' ? `unexpected argument '${quoted}'`
      : code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE' ? `${flag} needs a value` : `unknown option '${flag}'`;
    return { action: 'exit', code: 2, stderr: `pool-managerd: ${what}\n\n${USAGE}\n` };
  }
  if (values.help === true) return { action: 'exit', code: 0, stdout: `${USAGE}\n` };
  if (values.version === true) return { action: 'exit', code: 0, stdout: `pool-managerd ${packageVersion()}\n` };
  if (values.config === undefined || values.config === '') return { action: 'exit', code: 2, stderr: `pool-managerd: missing --config <file.yaml>\n\n${USAGE}\n` };
  return { action: 'run' };
}
