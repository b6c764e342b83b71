import { readFileSync } from 'node:fs';
import { KeysFileSchema, formatIssues, type OrchestratorConfig } from '@llama-orch/contracts';
import { sha256 } from '@llama-orch/daemon-support';
import { ConfigError } from '../errors.js';
import { parse as parseYaml } from 'yaml';

/** What a credential may do (see the route roles in http/auth.ts). */
export type Role = 'client' | 'operator' | 'node';

/** One accepted credential: only its SHA-256 is kept, never the key. */
export interface Credential {
  /** Shown in logs and as the `key` metric label (never the key itself). */
  readonly name: string;
  readonly role: Role;
  /** SHA-256 of the key. */
  readonly digest: Buffer;
  /** Requests per minute; undefined = unlimited. */
  readonly rateLimit?: number;
  /** `batch` = this key's tasks never go interactive. */
  readonly maxPriority: 'interactive' | 'batch';
}

/** Every credential orchestratord accepts; none at all = auth off (loopback binds only). */
export interface Credentials {
  readonly keys: readonly Credential[];
}

export interface LoadCredentialsOptions {
  config: Readonly<OrchestratorConfig>;
  /** Environment, for the keys' `key_env` references (main passes `process.env`). */
  env: Readonly<Record<string, string | undefined>>;
  /** @default readFileSync(path, 'utf8') */
  readFile?: (path: string) => string;
}

/**
 * The credentials of a configuration. `LLORCH_API_TOKEN` is the operator credential `default`
 * (client and operator routes) and, without `LLORCH_NODE_TOKEN`, the node credential too — so
 * with nothing else configured one token serves every route (no keys file needed). The node
 * token (`node`) opens only the node routes. The keys file (`ORCHD_KEYS_FILE`) adds named client
 * and operator keys. Every problem is reported in one {@link ConfigError}.
 */
export function loadCredentials(options: LoadCredentialsOptions): Credentials {
  const { config, env } = options;
  const keys: Credential[] = [];
  const problems: string[] = [];
  if (config.api_token !== undefined)
    keys.push({ name: 'default', role: 'operator', digest: sha256(config.api_token), maxPriority: 'interactive' });
  const nodeToken = config.node_token ?? config.api_token;
  if (nodeToken !== undefined)
    keys.push({ name: 'node', role: 'node', digest: sha256(nodeToken), maxPriority: 'interactive' });
  if (config.keys_file !== undefined) {
    if (nodeToken === undefined)
      problems.push('ORCHD_KEYS_FILE needs LLORCH_NODE_TOKEN (or LLORCH_API_TOKEN) for the node API');
    let text: string | undefined;
    try {
      text = (options.readFile ?? ((p) => readFileSync(p, 'utf8')))(config.keys_file);
    } catch (err) {
      problems.push(
        `ORCHD_KEYS_FILE: cannot read ${config.keys_file} (${(err as NodeJS.ErrnoException).code ?? String(err)})`,
      );
    }
    if (text !== undefined) {
      const parsed = KeysFileSchema.safeParse(parseKeysFile(text, problems));
      if (!parsed.success)
        for (const line of formatIssues(parsed.error).split('\n')) problems.push(`ORCHD_KEYS_FILE (${line})`);
      else {
        for (const k of parsed.data.keys) {
          let digest: Buffer | undefined;
          if (k.key_sha256 !== undefined) digest = Buffer.from(k.key_sha256.toLowerCase(), 'hex');
          else {
            const value = env[k.key_env ?? ''];
            if (value === undefined || value.length < 16)
              problems.push(`ORCHD_KEYS_FILE: key '${k.name}': ${k.key_env} is unset or shorter than 16 characters`);
            else digest = sha256(value);
          }
          if (digest === undefined) continue;
          if (k.name === 'default' || k.name === 'node')
            problems.push(`ORCHD_KEYS_FILE: key name '${k.name}' is reserved`);
          keys.push({
            name: k.name,
            role: k.role,
            digest,
            maxPriority: k.max_priority,
            ...(k.rate_limit !== undefined ? { rateLimit: k.rate_limit } : {}),
          });
        }
      }
    }
  }
  const seen = new Map<string, string>();
  for (const k of keys) {
    const hex = k.digest.toString('hex');
    const other = seen.get(hex);
    // the legacy token doubling as node token is the one allowed repeat
    if (other !== undefined && !(other === 'default' && k.name === 'node'))
      problems.push(`ORCHD_KEYS_FILE: keys '${other}' and '${k.name}' are the same key`);
    seen.set(hex, k.name);
  }
  if (problems.length > 0) throw new ConfigError(problems);
  return Object.freeze({ keys: Object.freeze(keys) });
}

/** The keys file's text as data (YAML, JSON being a subset of it); a problem otherwise. */
function parseKeysFile(text: string, problems: string[]): unknown {
  try {
    return parseYaml(text) as unknown;
  } catch (err) {
    problems.push(`ORCHD_KEYS_FILE: ${(err as Error).message}`);
    return undefined;
  }
}
