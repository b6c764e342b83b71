import { readFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { dirname, isAbsolute, join, resolve } from 'node:path';
import { parseDocument } from 'yaml';
import { defaultCacheDir } from '@llama-orch/engine-provisioner';
import { PoolManagerConfigSchema, formatIssues, type PoolManagerConfig } from '@llama-orch/contracts';
import { isLoopbackHost, parseDaemonArgv, splitHostPort } from '@llama-orch/daemon-support';
import { ConfigError } from './errors.js';
import { ARGV_SPEC } from './support/argv.js';

/** What main.ts derives from the YAML file, argv and env, once, at start-up. */
export interface DaemonSettings {
  config: PoolManagerConfig;
  configPath: string;
  /** Directory of the config file; relative paths in it resolve against it. */
  configDir: string;
  apiToken: string | undefined;
  host: string;
  port: number;
  runtimeDir: string;
  cacheDir: string;
}

/** `--config <path>` (`-c`, `--config=<path>`): the command line main.ts already checked ({@link ARGV_SPEC}). */
export function parseArgv(argv: readonly string[]): { configPath: string } {
  const outcome = parseDaemonArgv(argv, ARGV_SPEC);
  if (outcome.action !== 'run' || outcome.value === undefined) {
    throw new ConfigError(
      outcome.action === 'exit' && outcome.stderr !== undefined
        ? (outcome.stderr.split('\n', 1)[0] ?? '')
        : 'missing --config <file.yaml>',
    );
  }
  return { configPath: outcome.value };
}

type Env = Readonly<Record<string, string | undefined>>;

function deepFreeze<T>(value: T): T {
  if (value && typeof value === 'object') {
    for (const v of Object.values(value)) deepFreeze(v);
    Object.freeze(value);
  }
  return value;
}

/**
 * Reads and validates pool-managerd's YAML config. Every problem (YAML syntax, unknown keys, wrong
 * types) is reported at once in one {@link ConfigError}. Model refs and paths are left as written.
 * `api_token` is the node token: the file's, else env `LLORCH_NODE_TOKEN`, else env
 * `LLORCH_API_TOKEN` (empty = unset); at least 16 characters. The result is deeply frozen.
 */
export async function loadPoolManagerConfig(path: string, env: Env = {}): Promise<PoolManagerConfig> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    throw new ConfigError(
      `cannot read config ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`,
      { path },
      { cause: err },
    );
  }
  return parsePoolManagerConfig(text, path, env);
}

/** {@link loadPoolManagerConfig} for text already in memory; `origin` names it in errors. */
export function parsePoolManagerConfig(text: string, origin: string, env: Env = {}): PoolManagerConfig {
  const doc = parseDocument(text, { prettyErrors: true, uniqueKeys: true });
  if (doc.errors.length > 0) {
    throw new ConfigError(`config ${origin} is not valid YAML:\n${doc.errors.map((e) => e.message).join('\n')}`, {
      path: origin,
    });
  }
  const parsed = PoolManagerConfigSchema.safeParse(doc.toJS());
  if (!parsed.success) {
    const issues = formatIssues(parsed.error);
    throw new ConfigError(`config ${origin} is invalid:\n${issues}`, { path: origin, issues: issues.split('\n') });
  }
  // The node token: what orchestratord's node API takes (LLORCH_NODE_TOKEN there) and what its
  // dispatches here carry; the shared LLORCH_API_TOKEN when the cluster has no separate one.
  const fromEnv = (name: string): string | undefined =>
    env[name] !== undefined && env[name] !== '' ? env[name] : undefined;
  const apiToken = parsed.data.api_token ?? fromEnv('LLORCH_NODE_TOKEN') ?? fromEnv('LLORCH_API_TOKEN');
  if (apiToken !== undefined && apiToken.length < 16)
    throw new ConfigError(
      'the node token (api_token, LLORCH_NODE_TOKEN or LLORCH_API_TOKEN) must be at least 16 characters',
      { path: origin },
    );
  return deepFreeze(apiToken === undefined ? parsed.data : { ...parsed.data, api_token: apiToken });
}

/**
 * Loads and validates the config ({@link loadPoolManagerConfig}) and resolves addresses, runtime
 * dir and cache dir. Cache dir: env `LLORCH_CACHE_DIR` > config > `~/.cache/llama-orch`. A
 * non-loopback bind without a token refuses to start.
 */
export async function loadSettings(
  argv: readonly string[],
  env: Env,
  home: string = homedir(),
): Promise<DaemonSettings> {
  const { configPath: given } = parseArgv(argv);
  const configPath = resolve(given);
  const config = await loadPoolManagerConfig(configPath, env);
  const configDir = dirname(configPath);
  const abs = (p: string): string => (isAbsolute(p) ? p : resolve(configDir, p.replace(/^~(?=\/|$)/, home)));
  const { host, port } = splitHostPort(config.node.addr);
  const apiToken = config.api_token;
  if (apiToken === undefined && !isLoopbackHost(host)) {
    throw new ConfigError(
      `node.addr ${config.node.addr} is not loopback: set api_token or LLORCH_API_TOKEN (refusing an open API)`,
    );
  }
  const h2c = config.node.dispatch_h2c_addr;
  if (apiToken === undefined && h2c !== undefined && h2c !== 'off' && !isLoopbackHost(splitHostPort(h2c).host)) {
    throw new ConfigError(
      `node.dispatch_h2c_addr ${h2c} is not loopback: set api_token or LLORCH_API_TOKEN (refusing an open API)`,
    );
  }
  const runtimeDir =
    config.runtime_dir !== undefined
      ? abs(config.runtime_dir)
      : join(home, '.local', 'state', 'llama-orch', config.node.id);
  const cacheDir =
    env.LLORCH_CACHE_DIR !== undefined && env.LLORCH_CACHE_DIR !== ''
      ? resolve(env.LLORCH_CACHE_DIR)
      : config.cache_dir !== undefined
        ? abs(config.cache_dir)
        : defaultCacheDir(home);
  return { config, configPath, configDir, apiToken, host, port, runtimeDir, cacheDir };
}
