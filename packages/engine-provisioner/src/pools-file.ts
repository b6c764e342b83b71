import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parseDocument } from 'yaml';
import { z } from 'zod';
import { PoolConfigSchema, formatIssues, type PoolConfig } from '@llama-orch/contracts';
import { EngineProvisionError } from './errors.js';

/** What engine-provisioner takes from a pool-managerd config file. */
export interface PoolsFile {
  /** The file's pools, each validated with contracts' `PoolConfigSchema` (frozen). */
  readonly pools: readonly PoolConfig[];
  /** The file's `cache_dir`, as written. */
  readonly cacheDir: string | undefined;
}

// Only the sections this package needs: the file is pool-managerd's, which validates all of it
// (unknown keys, node identity, supervision) at start; its other keys are not looked at here.
const PoolsSectionSchema = z.object({ pools: z.array(PoolConfigSchema).min(1), cache_dir: z.string().optional() });

/**
 * The pools of a pool-managerd YAML config file (`requirements/*.yaml`), for the CLI and the test
 * engine: YAML syntax errors, a missing file and invalid pools are one `CONFIG_INVALID`.
 */
export async function readPoolsFile(path: string): Promise<PoolsFile> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    throw new EngineProvisionError('CONFIG_INVALID', `cannot read config ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`, { path }, { cause: err });
  }
  const doc = parseDocument(text, { prettyErrors: true, uniqueKeys: true });
  if (doc.errors.length > 0) {
    throw new EngineProvisionError('CONFIG_INVALID', `config ${path} is not valid YAML:\n${doc.errors.map((e) => e.message).join('\n')}`, { path });
  }
  const parsed = PoolsSectionSchema.safeParse(doc.toJS());
  if (!parsed.success) {
    const issues = formatIssues(parsed.error);
    throw new EngineProvisionError('CONFIG_INVALID', `config ${path} has invalid pools:\n${issues}`, { path, issues: issues.split('\n') });
  }
  return Object.freeze({ pools: Object.freeze(parsed.data.pools.map((p) => Object.freeze(p))), cacheDir: parsed.data.cache_dir });
}

/**
 * The default cache root, `<homedir>/.cache/llama-orch`. Callers pass `os.homedir()` (or
 * `$XDG_CACHE_HOME`'s parent) from their process boundary.
 */
export function defaultCacheDir(homedir: string): string {
  return join(homedir, '.cache', 'llama-orch');
}
