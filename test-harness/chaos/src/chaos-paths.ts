import { existsSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { repoRoot } from '@llama-orch/e2e-haiku';

/** Built entry points the suite runs (the README test command builds them first). */
export function appMain(app: 'orchestratord' | 'pool-managerd'): string {
  const path = join(repoRoot(), 'apps', app, 'dist', 'main.js');
  if (!existsSync(path)) throw new Error(`${path} is missing: run \`pnpm build\` first`);
  return path;
}

/** Engine/model cache shared by every suite (`LLORCH_TEST_CACHE_DIR` or `<repo>/.cache/llama-orch`). */
export function sharedCacheDir(): string {
  const fromEnv = process.env.LLORCH_TEST_CACHE_DIR;
  return fromEnv !== undefined && fromEnv !== '' ? fromEnv : join(repoRoot(), '.cache', 'llama-orch');
}

/** A token of the product's minimum length plus noise, unique per run. */
export function newToken(prefix: string): string {
  return `${prefix}-${randomBytes(12).toString('hex')}`;
}
