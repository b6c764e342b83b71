import { createRequire } from 'node:module';
import { readFileSync, existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { SourceError } from './errors.js';

/** Where the llama.cpp source that ships inside `node-llama-cpp` lives, and which release it is. */
export interface LlamaCppBundle {
  /** Absolute path of `llama/gitRelease.bundle`. */
  bundlePath: string;
  /** Release tag from `llama/llama.cpp.info.json` (e.g. `v0.5.0`). */
  tag: string;
  /** Upstream repository the release came from (e.g. `ggml-org/llama.cpp`). */
  repo: string;
  /** Version of the `node-llama-cpp` package that carried it. */
  carrierVersion: string;
}

/**
 * Finds the llama.cpp git bundle inside the installed `node-llama-cpp` package.
 * Only the source bundle is used: the package's prebuilt binaries and postinstall are kept out of
 * the install (see the root package.json `pnpm` settings).
 */
export function locateBundle(): LlamaCppBundle {
  let entry: string;
  try {
    entry = createRequire(import.meta.url).resolve('node-llama-cpp');
  } catch (err) {
    throw new SourceError(
      'SOURCE_NOT_FOUND',
      'node-llama-cpp is not installed; run the README set-up',
      {},
      { cause: err },
    );
  }
  // entry is <pkg>/dist/index.js
  const pkgDir = dirname(dirname(entry));
  const bundlePath = join(pkgDir, 'llama', 'gitRelease.bundle');
  const infoPath = join(pkgDir, 'llama', 'llama.cpp.info.json');
  if (!existsSync(bundlePath) || !existsSync(infoPath)) {
    throw new SourceError('SOURCE_NOT_FOUND', `llama.cpp bundle missing in ${pkgDir}/llama`, { pkgDir });
  }
  const info = JSON.parse(readFileSync(infoPath, 'utf8')) as { tag?: unknown; llamaCppGithubRepo?: unknown };
  const pkg = JSON.parse(readFileSync(join(pkgDir, 'package.json'), 'utf8')) as { version?: unknown };
  return {
    bundlePath,
    tag: typeof info.tag === 'string' ? info.tag : 'unknown',
    repo: typeof info.llamaCppGithubRepo === 'string' ? info.llamaCppGithubRepo : 'unknown',
    carrierVersion: typeof pkg.version === 'string' ? pkg.version : 'unknown',
  };
}
