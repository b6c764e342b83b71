import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

// Imports node built-ins only, and is its own entry (`@llama-orch/daemon-support/argv`): a daemon's
// main answers --help and --version before it loads anything else.

/** What a daemon's main does with its command line: start, or print and exit with `code`. */
export type ArgvOutcome =
  { action: 'run'; value?: string } | { action: 'exit'; code: number; stdout?: string; stderr?: string };

/** A daemon's command line: `--help`/`-h`, `--version`/`-V`, and at most one required option with a value. */
export interface DaemonArgvSpec {
  /** Program name: the first word of `--version` and of every error line. */
  name: string;
  /** `--help` text, also printed (on stderr) after a usage error. */
  usage: string;
  /** The version `--version` prints (read only when asked). */
  version: () => string;
  /** The one option with a value the daemon needs (pool-managerd's `--config <file.yaml>`); its value is `value` of a `run`. */
  required?: { name: string; short: string; placeholder: string };
}

/**
 * `--help` and `--version` exit 0 (whatever else is given); an unknown option, a positional
 * argument, an option without its value or a missing required option is a usage error: one line
 * (`<name>: unknown option '--x'`) and the usage on stderr, exit 2.
 */
export function parseDaemonArgv(argv: readonly string[], spec: DaemonArgvSpec): ArgvOutcome {
  const req = spec.required;
  const usageError = (what: string): ArgvOutcome => ({
    action: 'exit',
    code: 2,
    stderr: `${spec.name}: ${what}\n\n${spec.usage}\n`,
  });
  let values: Record<string, string | boolean | undefined>;
  try {
    ({ values } = parseArgs({
      args: [...argv],
      strict: true,
      allowPositionals: false,
      options: {
        help: { type: 'boolean', short: 'h' },
        version: { type: 'boolean', short: 'V' },
        ...(req !== undefined ? { [req.name]: { type: 'string', short: req.short } } : {}),
      },
    }));
  } catch (err) {
    const { code, message } = err as { code?: string; message: string };
    const quoted = /'([^']+)'/.exec(message)?.[1] ?? String(argv[0]);
    const flag = /--[\w-]+/.exec(quoted)?.[0] ?? quoted.split(' ')[0] ?? quoted;
    return usageError(
      code === 'ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL'
        ? `unexpected argument '${quoted}'`
        : code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE'
          ? `${flag} needs a value`
          : `unknown option '${flag}'`,
    );
  }
  if (values.help === true) return { action: 'exit', code: 0, stdout: `${spec.usage}\n` };
  if (values.version === true) return { action: 'exit', code: 0, stdout: `${spec.name} ${spec.version()}\n` };
  if (req === undefined) return { action: 'run' };
  const value = values[req.name];
  if (typeof value !== 'string' || value === '') return usageError(`missing --${req.name} ${req.placeholder}`);
  return { action: 'run', value };
}

/** The `version` of a package.json (`0.0.0` when it has none). */
export function readPackageVersion(packageJson: URL): string {
  const pkg = JSON.parse(readFileSync(packageJson, 'utf8')) as { version?: unknown };
  return typeof pkg.version === 'string' ? pkg.version : '0.0.0';
}
