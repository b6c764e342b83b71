import {
  ORCHESTRATOR_ENV,
  OrchestratorConfigSchema,
  formatIssues,
  type OrchestratorConfig,
} from '@llama-orch/contracts';
import { isLoopbackHost, splitHostPort } from '@llama-orch/daemon-support';
import { ConfigError } from './errors.js';

/** Where configuration comes from. Only the variables named in `ORCHESTRATOR_ENV` are read. */
export interface LoadConfigOptions {
  /** Environment (pass `process.env` from main; tests pass a literal). */
  env: Readonly<Record<string, string | undefined>>;
}

const KEY_TO_ENV: Readonly<Record<string, string>> = Object.freeze(
  Object.fromEntries(Object.entries(ORCHESTRATOR_ENV).map(([env, key]) => [key, env])),
);

/**
 * Parses and validates orchestratord's configuration once. Every problem (bad values, a port out
 * of range, a non-loopback bind without `LLORCH_API_TOKEN`) is reported in one {@link ConfigError}.
 * Empty variables count as unset. The result is frozen.
 */
export function loadConfig(options: LoadConfigOptions): Readonly<OrchestratorConfig> {
  const raw: Record<string, string> = {};
  for (const [envName, key] of Object.entries(ORCHESTRATOR_ENV)) {
    const value = options.env[envName];
    if (value !== undefined && value.trim() !== '') raw[key] = value.trim();
  }
  const parsed = OrchestratorConfigSchema.safeParse(raw);
  const problems: string[] = [];
  if (!parsed.success) {
    for (const line of formatIssues(parsed.error).split('\n')) {
      const key = line.slice(0, line.indexOf(':'));
      const envName = KEY_TO_ENV[key];
      problems.push(envName === undefined ? line : `${envName} (${line})`);
    }
  }
  const addr = parsed.success ? parsed.data.addr : raw.addr;
  if (addr !== undefined && /:\d{1,5}$/.test(addr)) {
    const { host, port } = splitHostPort(addr);
    if (port > 65_535) problems.push(`ORCHD_ADDR: port ${port} is out of range (0..65535)`);
    const token = parsed.success ? parsed.data.api_token : raw.api_token;
    const keyed = raw.keys_file !== undefined && raw.node_token !== undefined;
    if (!isLoopbackHost(host) && token === undefined && !keyed) {
      problems.push(
        `ORCHD_ADDR: binding ${addr} (not loopback) requires LLORCH_API_TOKEN (or ORCHD_KEYS_FILE with LLORCH_NODE_TOKEN)`,
      );
    }
  }
  if (problems.length > 0 || !parsed.success) throw new ConfigError(problems);
  return Object.freeze(parsed.data);
}
