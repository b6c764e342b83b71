import { readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { Script } from 'node:vm';

/**
 * `manifest.json` that `scripts/bundle.mjs` writes next to the bundle. Checked by hand, not with
 * zod: this runs before any dependency is loaded (zod itself is inside the bundle).
 */
export interface BundleManifest {
  version: 1;
  /** The bundle, relative to the manifest's directory (a CommonJS file, ASCII only). */
  file: string;
  /** sha256 of the bundle: names its V8 code cache (V8 checks a cache against the source length only). */
  buildId: string;
  /**
   * Files the bundle was built from (paths relative to the manifest's directory), with size and
   * mtime at build time. The bundle itself is one of them.
   */
  inputs: Array<{ path: string; size: number; mtimeMs: number }>;
}

/** `hit`: V8 used the cache; `miss`: none yet; `rejected`: V8 refused it (other Node/V8 flags). */
export type CodeCacheState = 'hit' | 'miss' | 'rejected';

export interface LoadedBundle<T> {
  exports: T;
  codeCache: CodeCacheState;
}

export type BundleUnusable = 'no-manifest' | 'bad-manifest' | 'stale';

export interface LoadBundleOptions {
  /** Registers the code-cache write. @default (write) => process.once('exit', write) */
  atExit?: (write: () => void) => void;
}

function isManifest(v: unknown): v is BundleManifest {
  if (typeof v !== 'object' || v === null) return false;
  const m = v as Partial<BundleManifest>;
  return (
    m.version === 1 &&
    typeof m.file === 'string' &&
    typeof m.buildId === 'string' &&
    /^[0-9a-f]{64}$/.test(m.buildId) &&
    Array.isArray(m.inputs) &&
    m.inputs.every(
      (i) =>
        typeof i === 'object' &&
        i !== null &&
        typeof i.path === 'string' &&
        typeof i.size === 'number' &&
        typeof i.mtimeMs === 'number',
    )
  );
}

/** Short stable hash (FNV-1a) of what makes V8 refuse a cache: Node version, arch, V8 flags. */
function runtimeKey(): string {
  let h = 0x811c9dc5;
  for (const ch of [process.version, process.arch, ...process.execArgv].join('\0')) {
    h ^= ch.charCodeAt(0);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h.toString(16).padStart(8, '0');
}

/** Path of the V8 code cache of `manifest`'s bundle for this Node binary and flags. */
export function codeCachePath(dir: string, manifest: BundleManifest): string {
  return join(dir, `${manifest.file}.${manifest.buildId.slice(0, 16)}.${runtimeKey()}.v8cache`);
}

/**
 * Why the bundle in `dir` cannot be used, or undefined when it can: every input must still have
 * the size and mtime it had when the bundle was built (a `tsc --build` after the bundle step makes
 * it stale; main.ts then runs the modules instead).
 */
export function checkBundle(dir: string): { manifest: BundleManifest } | { unusable: BundleUnusable } {
  let raw: string;
  try {
    raw = readFileSync(join(dir, 'manifest.json'), 'utf8');
  } catch {
    return { unusable: 'no-manifest' };
  }
  let manifest: unknown;
  try {
    manifest = JSON.parse(raw);
  } catch {
    return { unusable: 'bad-manifest' };
  }
  if (!isManifest(manifest)) return { unusable: 'bad-manifest' };
  for (const input of manifest.inputs) {
    const st = statSync(resolve(dir, input.path), { throwIfNoEntry: false });
    if (st === undefined || st.size !== input.size || st.mtimeMs !== input.mtimeMs) return { unusable: 'stale' };
  }
  return { manifest };
}

/** Best effort by design: an unwritable cache only costs the next start its speed; never throws (runs at exit). */
function writeCodeCache(script: Script, path: string): void {
  const tmp = `${path}.${process.pid}.tmp`;
  try {
    writeFileSync(tmp, script.createCachedData());
    renameSync(tmp, path);
  } catch {
    try {
      rmSync(tmp, { force: true });
    } catch {
      // Nothing left to do at exit.
    }
  }
}

/**
 * Loads the CommonJS bundle described by `<dir>/manifest.json` through `vm.Script` with a V8 code
 * cache, so that a start skips parsing and compiling what the previous run already compiled
 * (Node 20 has no compile cache of its own). Returns the bundle's exports, or the reason it is
 * unusable (missing, or stale against its inputs).
 *
 * Without a usable cache, one is written when the process exits: by then it holds every function
 * the run compiled, start-up and shutdown included. Written to a temp file and renamed; a cache
 * that cannot be written (read-only install) only costs the next start its speed.
 */
export function loadBundle<T>(
  dir: string,
  opts: LoadBundleOptions = {},
): LoadedBundle<T> | { unusable: BundleUnusable } {
  const checked = checkBundle(dir);
  if ('unusable' in checked) return checked;
  const { manifest } = checked;
  const file = resolve(dir, manifest.file);
  const cachePath = codeCachePath(dir, manifest);
  let cachedData: Buffer | undefined;
  try {
    cachedData = readFileSync(cachePath);
  } catch {
    cachedData = undefined;
  }
  // ASCII by construction (the bundle step checks): latin1 skips UTF-8 decoding of megabytes.
  const source = readFileSync(file, 'latin1');
  const script = new Script(`(function (exports, require, module, __filename, __dirname) {${source}\n})`, {
    filename: file,
    ...(cachedData !== undefined ? { cachedData } : {}),
  });
  const codeCache: CodeCacheState =
    cachedData === undefined ? 'miss' : script.cachedDataRejected === true ? 'rejected' : 'hit';
  if (codeCache !== 'hit') {
    const atExit = opts.atExit ?? ((write: () => void) => process.once('exit', write));
    atExit(() => writeCodeCache(script, cachePath));
  }
  const mod = { exports: {} as T };
  const fn = script.runInThisContext() as (
    exports: T,
    require: NodeJS.Require,
    module: { exports: T },
    filename: string,
    dirname: string,
  ) => void;
  fn(mod.exports, createRequire(file), mod, file, dirname(file));
  return { exports: mod.exports, codeCache };
}
