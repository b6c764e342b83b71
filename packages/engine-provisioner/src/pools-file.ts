import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parseDocument } from 'yaml';
import { PoolManagerConfigSchema, formatIssues, type PoolConfig } from '@llama-orch/contracts';
import { EngineProvisionError } from './errors.js';

/** What engine-provisioner takes from a pool-managerd config file. */
export interface PoolsFile {
  /** The file's pools (frozen). */
  readonly pools: readonly PoolConfig[];
  /** The file's `cache_dir`, as written. */
  readonly cacheDir: string | undefined;
}

/**
 * The pools and cache dir of a pool-managerd YAML config file (`requirements/*.yaml`), for the CLI
 * and the test engine. The file is validated whole with contracts' `PoolManagerConfigSchema` (the
 * contract, not pool-managerd's loader: no environment, no token, nothing resolved), so the CLI
 * names every problem of a file the daemon would refuse. A missing file, YAML errors and any
 * invalid key are one `CONFIG_INVALID`.
 */
export async function readPoolsFile(path: string): Promise<PoolsFile> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    throw new EngineProvisionError(
      'CONFIG_INVALID',
      `cannot read config ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`,
      { path },
      { cause: err },
    );
  }
  const doc = parseDocument(text, { prettyErrors: true, uniqueKeys: true });
  if (doc.errors.length > 0) {
    throw new EngineProvisionError(
      'CONFIG_INVALID',
      `config ${path} is not valid YAML:\n${doc.errors.map((e) => e.message).join('\n')}`,
      { path },
    );
  }
  const parsed = PoolManagerConfigSchema.safeParse(doc.toJS());
  if (!parsed.success) {
    const issues = formatIssues(parsed.error);
    throw new EngineProvisionError('CONFIG_INVALID', `config ${path} is invalid:\n${issues}`, {
      path,
      issues: issues.split('\n'),
    });
  }
  return Object.freeze({
    pools: Object.freeze(parsed.data.pools.map((p) => Object.freeze(p))),
    cacheDir: parsed.data.cache_dir,
  });
}

/**
 * The default cache root, `<homedir>/.cache/llama-orch`. Callers pass `os.homedir()` (or
 * `$XDG_CACHE_HOME`'s parent) from their process boundary.
 */
export function defaultCacheDir(homedir: string): string {
  return join(homedir, '.cache', 'llama-orch');
}
