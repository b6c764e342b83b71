import { homedir } from 'node:os';
import { dirname, isAbsolute, join, resolve } from 'node:path';
import { loadPoolManagerConfig, defaultCacheDir } from '@llama-orch/engine-provisioner';
import type { PoolManagerConfig } from '@llama-orch/contracts';
import { ConfigError } from './errors.js';

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

const LOOPBACK = /^(127\.\d+\.\d+\.\d+|localhost|\[?::1\]?)$/;

export function isLoopbackHost(host: string): boolean {
  return LOOPBACK.test(host);
}

/** `host:port` → parts (IPv6 literals keep their brackets stripped). */
export function splitHostPort(addr: string): { host: string; port: number } {
  const i = addr.lastIndexOf(':');
  const host = addr.slice(0, i).replace(/^\[(.*)\]$/, '$1');
  return { host, port: Number.parseInt(addr.slice(i + 1), 10) };
}

/** `--config <path>` (or `--config=<path>`). */
export function parseArgv(argv: readonly string[]): { configPath: string } {
  let configPath: string | undefined;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] ?? '';
    if (a === '--config' || a === '-c') configPath = argv[++i];
    else if (a.startsWith('--config=')) configPath = a.slice('--config='.length);
    else throw new ConfigError(`unknown argument '${a}'; usage: pool-managerd --config <file.yaml>`);
  }
  if (configPath === undefined || configPath === '') throw new ConfigError('missing --config <file.yaml>');
  return { configPath };
}

/**
 * Loads and validates the config (every problem in one error, unknown keys rejected) and resolves
 * token, runtime dir and cache dir. Precedence: cache dir env `LLORCH_CACHE_DIR` > config >
 * `~/.cache/llama-orch`; token config `api_token` > env `LLORCH_NODE_TOKEN` > env `LLORCH_API_TOKEN`. A non-loopback bind
 * without a token refuses to start.
 */
export async function loadSettings(argv: readonly string[], env: Readonly<Record<string, string | undefined>>, home: string = homedir()): Promise<DaemonSettings> {
  const { configPath: given } = parseArgv(argv);
  const configPath = resolve(given);
  let config: PoolManagerConfig;
  try {
    // The loader fills api_token from LLORCH_API_TOKEN; a LLORCH_NODE_TOKEN takes precedence over it.
    config = await loadPoolManagerConfig(configPath, env.LLORCH_NODE_TOKEN !== undefined && env.LLORCH_NODE_TOKEN !== '' ? { ...env, LLORCH_API_TOKEN: undefined } : env);
  } catch (err) {
    throw new ConfigError((err as Error).message, { path: configPath }, { cause: err });
  }
  const configDir = dirname(configPath);
  const abs = (p: string): string => (isAbsolute(p) ? p : resolve(configDir, p.replace(/^~(?=\/|$)/, home)));
  const { host, port } = splitHostPort(config.node.addr);
  // The node token: what orchestratord's node API takes (LLORCH_NODE_TOKEN there) and what its
  // dispatches here carry; the shared LLORCH_API_TOKEN when the cluster has no separate one.
  const fromEnv = (name: string): string | undefined => (env[name] !== undefined && env[name] !== '' ? env[name] : undefined);
  const apiToken = config.api_token ?? fromEnv('LLORCH_NODE_TOKEN') ?? fromEnv('LLORCH_API_TOKEN');
  if (apiToken !== undefined && apiToken.length < 16) throw new ConfigError('the node token (api_token, LLORCH_NODE_TOKEN or LLORCH_API_TOKEN) must be at least 16 characters');
  if (apiToken === undefined && !isLoopbackHost(host)) {
    throw new ConfigError(`node.addr ${config.node.addr} is not loopback: set api_token or LLORCH_API_TOKEN (refusing an open API)`);
  }
  const h2c = config.node.dispatch_h2c_addr;
  if (apiToken === undefined && h2c !== undefined && h2c !== 'off' && !isLoopbackHost(splitHostPort(h2c).host)) {
    throw new ConfigError(`node.dispatch_h2c_addr ${h2c} is not loopback: set api_token or LLORCH_API_TOKEN (refusing an open API)`);
  }
  const runtimeDir = config.runtime_dir !== undefined ? abs(config.runtime_dir) : join(home, '.local', 'state', 'llama-orch', config.node.id);
  const cacheDir = env.LLORCH_CACHE_DIR !== undefined && env.LLORCH_CACHE_DIR !== ''
    ? resolve(env.LLORCH_CACHE_DIR)
    : config.cache_dir !== undefined ? abs(config.cache_dir) : defaultCacheDir(home);
  return { config, configPath, configDir, apiToken, host, port, runtimeDir, cacheDir };
}
