import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parseDocument } from 'yaml';
import { PoolManagerConfigSchema, formatIssues, type PoolManagerConfig } from '@llama-orch/contracts';
import { EngineProvisionError } from './errors.js';

function deepFreeze<T>(value: T): T {
  if (value && typeof value === 'object') {
    for (const v of Object.values(value)) deepFreeze(v);
    Object.freeze(value);
  }
  return value;
}

/**
 * Reads and validates a pool-managerd YAML config. Every problem (YAML syntax, unknown keys,
 * wrong types) is reported at once in one `CONFIG_INVALID`. Model refs and paths are left as
 * written. `api_token` falls back to `env.LLORCH_API_TOKEN` when the file has none.
 * The result is deeply frozen.
 */
export async function loadPoolManagerConfig(path: string, env: Readonly<Record<string, string | undefined>> = {}): Promise<PoolManagerConfig> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    throw new EngineProvisionError('CONFIG_INVALID', `cannot read config ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`, { path }, { cause: err });
  }
  return parsePoolManagerConfig(text, path, env);
}

/** {@link loadPoolManagerConfig} for text already in memory; `origin` names it in errors. */
export function parsePoolManagerConfig(text: string, origin: string, env: Readonly<Record<string, string | undefined>> = {}): PoolManagerConfig {
  const doc = parseDocument(text, { prettyErrors: true, uniqueKeys: true });
  if (doc.errors.length > 0) {
    throw new EngineProvisionError('CONFIG_INVALID', `config ${origin} is not valid YAML:\n${doc.errors.map((e) => e.message).join('\n')}`, { path: origin });
  }
  const raw: unknown = doc.toJS();
  const withEnv = raw && typeof raw === 'object' && !Array.isArray(raw) && !('api_token' in raw) && env.LLORCH_API_TOKEN
    ? { ...raw, api_token: env.LLORCH_API_TOKEN }
    : raw;
  const parsed = PoolManagerConfigSchema.safeParse(withEnv);
  if (!parsed.success) {
    const issues = formatIssues(parsed.error);
    throw new EngineProvisionError('CONFIG_INVALID', `config ${origin} is invalid:\n${issues}`, { path: origin, issues: issues.split('\n') });
  }
  return deepFreeze(parsed.data);
}

/**
 * The default cache root, `<homedir>/.cache/llama-orch`. Callers pass `os.homedir()` (or
 * `$XDG_CACHE_HOME`'s parent) from their process boundary.
 */
export function defaultCacheDir(homedir: string): string {
  return join(homedir, '.cache', 'llama-orch');
}
