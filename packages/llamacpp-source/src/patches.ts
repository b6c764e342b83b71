import { createHash } from 'node:crypto';
import { createRequire } from 'node:module';
import { readdir, readFile, rm } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { execa } from 'execa';
import { SourceError } from './errors.js';
import type { SourceTree } from './source-tree.js';

/** One `.patch` file carried on top of upstream llama.cpp. */
export interface SourcePatch {
  /** File name, e.g. `0001-server-queue-stop-check-deadline.patch`; patches apply in name order. */
  name: string;
  /** Absolute path of the file. */
  path: string;
  /** sha256 (hex) of the file's bytes. */
  sha256: string;
}

/** The patches a build applies, and one hash over all of them (part of the engine's cache key). */
export interface PatchSet {
  patches: readonly SourcePatch[];
  /** sha256 over every patch's name and content in order; `undefined` for an empty set. */
  hash: string | undefined;
}

/** The empty set: a build of upstream as is. */
export const NO_PATCHES: PatchSet = Object.freeze({ patches: Object.freeze([]), hash: undefined });

/**
 * This package's `patches/` folder. Resolved through the package's own name rather than a path
 * relative to this file, so it is found from the tsc output and from a bundle that inlines this
 * module (pool-managerd's daemon bundle depends on this package for that reason).
 */
export function defaultPatchesDir(): string {
  return join(dirname(createRequire(import.meta.url).resolve('@llama-orch/llamacpp-source/package.json')), 'patches');
}

/** Reads every `*.patch` file of `dir`, in name order. A missing folder is an error: the set would silently be empty. */
export async function loadPatchSet(dir: string = defaultPatchesDir()): Promise<PatchSet> {
  let names: string[];
  try {
    names = (await readdir(dir)).filter((n) => n.endsWith('.patch')).sort();
  } catch (err) {
    throw new SourceError(
      'SOURCE_NOT_FOUND',
      `llama.cpp patches folder ${dir} cannot be read (${(err as NodeJS.ErrnoException).code ?? 'error'})`,
      { path: dir },
      { cause: err },
    );
  }
  if (names.length === 0) return NO_PATCHES;
  const all = createHash('sha256');
  const patches = await Promise.all(
    names.map(async (name) => {
      const path = join(dir, name);
      const bytes = await readFile(path);
      return { name, path, sha256: createHash('sha256').update(bytes).digest('hex'), bytes };
    }),
  );
  for (const p of patches) all.update(`${p.name}\0${p.sha256}\n`);
  return { patches: patches.map(({ name, path, sha256 }) => ({ name, path, sha256 })), hash: all.digest('hex') };
}

interface GitResult {
  ok: boolean;
  /** Last lines of its output, for the error message. */
  detail: string;
}

async function git(args: string[], opts: { cwd: string; signal?: AbortSignal | undefined }): Promise<GitResult> {
  const res = await execa('git', args, {
    cwd: opts.cwd,
    cancelSignal: opts.signal,
    reject: false,
    env: { GIT_TERMINAL_PROMPT: '0' },
  });
  return {
    ok: res.exitCode === 0,
    detail: `${String(res.stderr)}\n${String(res.stdout)}`.trim().split('\n').slice(-4).join(' | '),
  };
}

/**
 * Makes `dest` a checkout of `tree`'s commit with `set` applied, for one build. The shared tree is
 * only read: `dest` is a `git clone --shared` of it (objects borrowed, files its own), so the
 * build's version stamp (`git rev-parse` at configure) stays the commit's. The caller removes
 * `dest` after the build. A patch that does not apply is `SOURCE_PATCH_FAILED` naming it.
 */
export async function preparePatchedTree(
  tree: SourceTree,
  set: PatchSet,
  dest: string,
  signal?: AbortSignal,
): Promise<void> {
  const fail = (res: GitResult, error: () => SourceError): void => {
    if (res.ok) return;
    signal?.throwIfAborted();
    throw error();
  };
  await rm(dest, { recursive: true, force: true });
  const clone = await git(['clone', '--quiet', '--shared', '--no-checkout', tree.dir, dest], {
    cwd: dirname(dest),
    signal,
  });
  fail(
    clone,
    () =>
      new SourceError('SOURCE_FETCH_FAILED', `copying ${tree.dir} for patching failed: ${clone.detail}`, {
        path: tree.dir,
      }),
  );
  const checkout = await git(['-c', 'advice.detachedHead=false', 'checkout', '--quiet', tree.commit], {
    cwd: dest,
    signal,
  });
  fail(
    checkout,
    () =>
      new SourceError('SOURCE_FETCH_FAILED', `checking out ${tree.commit} for patching failed: ${checkout.detail}`, {
        commit: tree.commit,
      }),
  );
  for (const patch of set.patches) {
    const applied = await git(['apply', '--whitespace=nowarn', patch.path], { cwd: dest, signal });
    fail(
      applied,
      () =>
        new SourceError(
          'SOURCE_PATCH_FAILED',
          `llama.cpp patch ${patch.name} does not apply to ${tree.commit.slice(0, 12)} (${tree.origin}): ${applied.detail}`,
          {
            patch: patch.name,
            commit: tree.commit,
          },
        ),
    );
  }
}
