import { mkdir, rename, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { execa } from 'execa';
import lockfile from 'proper-lockfile';
import { locateBundle } from './bundle.js';
import { SourceError } from './errors.js';

/** Which llama.cpp source to materialise. */
export type SourceSpec =
  | { kind: 'bundle'; /** Override of the bundle file; default: the one in node-llama-cpp. */ bundlePath?: string }
  | { kind: 'git'; /** Clone URL or path. */ repo: string; /** Branch, tag or commit. */ ref: string };

/** A complete llama.cpp checkout in the cache. */
export interface SourceTree {
  /** Checkout directory; read-only by convention (builds go elsewhere). */
  dir: string;
  /** Full commit hash checked out. */
  commit: string;
  /** Human label of where it came from (`bundle:v0.5.0`, `git:<repo>@<ref>`). */
  origin: string;
}

export interface EnsureSourceOptions {
  /** Root of the llama-orch cache; trees go to `<cacheDir>/sources/<commit>/`. */
  cacheDir: string;
  source: SourceSpec;
  signal?: AbortSignal;
}

const COMPLETE_MARKER = '.llorch-source-complete';

async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  );
}

async function git(args: string[], opts: { cwd?: string; signal?: AbortSignal } = {}): Promise<string> {
  const res = await execa('git', args, {
    cwd: opts.cwd,
    cancelSignal: opts.signal,
    reject: false,
    // no prompts for credentials on hosts without a helper
    env: { GIT_TERMINAL_PROMPT: '0' },
  });
  if (res.exitCode !== 0) {
    throw new SourceError(
      'SOURCE_FETCH_FAILED',
      `git ${args[0]} failed: ${String(res.stderr).trim().split('\n').slice(-3).join(' | ')}`,
      { args },
    );
  }
  return String(res.stdout).trim();
}

async function resolveCommit(
  source: SourceSpec,
  signal?: AbortSignal,
): Promise<{ commit: string; url: string; ref: string; origin: string }> {
  if (source.kind === 'bundle') {
    const bundle = source.bundlePath ? { bundlePath: source.bundlePath, tag: 'custom' } : locateBundle();
    if (!(await exists(bundle.bundlePath))) {
      throw new SourceError('SOURCE_NOT_FOUND', `llama.cpp bundle not found: ${bundle.bundlePath}`, {
        path: bundle.bundlePath,
      });
    }
    const heads = await git(['bundle', 'list-heads', bundle.bundlePath], { signal });
    const head = heads.split('\n').find((l) => l.endsWith(' HEAD')) ?? heads.split('\n')[0];
    const commit = head?.split(' ')[0];
    if (!commit || !/^[0-9a-f]{40}$/.test(commit)) {
      throw new SourceError('SOURCE_NOT_FOUND', `not a git bundle: ${bundle.bundlePath}`, { path: bundle.bundlePath });
    }
    return { commit, url: bundle.bundlePath, ref: 'HEAD', origin: `bundle:${bundle.tag}` };
  }
  if (/^[0-9a-f]{40}$/.test(source.ref)) {
    return { commit: source.ref, url: source.repo, ref: source.ref, origin: `git:${source.repo}@${source.ref}` };
  }
  const out = await git(['ls-remote', source.repo, source.ref, `${source.ref}^{}`], { signal });
  // annotated tags list the peeled commit second (`^{}`); prefer it
  const lines = out.split('\n').filter(Boolean);
  const line = lines.find((l) => l.endsWith('^{}')) ?? lines[0];
  const commit = line?.split('\t')[0];
  if (!commit) {
    throw new SourceError('SOURCE_REF_INVALID', `ref '${source.ref}' not found in ${source.repo}`, {
      repo: source.repo,
      ref: source.ref,
    });
  }
  return { commit, url: source.repo, ref: source.ref, origin: `git:${source.repo}@${source.ref}` };
}

/**
 * Makes sure a checkout of the requested llama.cpp source exists in the cache and returns it.
 * Checkouts are content-addressed by commit, cloned into a temp dir and renamed when complete,
 * under a cross-process lock, so a half-finished clone is never used.
 */
export async function ensureSourceTree(opts: EnsureSourceOptions): Promise<SourceTree> {
  const { commit, url, ref, origin } = await resolveCommit(opts.source, opts.signal);
  const root = join(opts.cacheDir, 'sources');
  const dir = join(root, commit);
  if (await exists(join(dir, COMPLETE_MARKER))) return { dir, commit, origin };

  await mkdir(root, { recursive: true });
  // one lock target per commit: proper-lockfile keys held locks by the locked path
  const release = await lockfile.lock(dir, {
    realpath: false,
    lockfilePath: join(root, `${commit}.lock`),
    retries: { retries: 600, minTimeout: 100, maxTimeout: 1000 },
    stale: 60_000,
  });
  try {
    if (await exists(join(dir, COMPLETE_MARKER))) return { dir, commit, origin };
    await rm(dir, { recursive: true, force: true });
    const tmp = `${dir}.tmp-${process.pid}`;
    await rm(tmp, { recursive: true, force: true });
    try {
      await git(['clone', '--quiet', '--no-checkout', url, tmp], { signal: opts.signal });
      if (ref !== 'HEAD')
        await git(['fetch', '--quiet', 'origin', ref], { cwd: tmp, signal: opts.signal }).catch(() => undefined);
      await git(['-c', 'advice.detachedHead=false', 'checkout', '--quiet', commit], { cwd: tmp, signal: opts.signal });
      await writeFile(join(tmp, COMPLETE_MARKER), `${origin}\n${commit}\n`);
      await rename(tmp, dir);
    } catch (err) {
      await rm(tmp, { recursive: true, force: true });
      if (err instanceof SourceError && opts.source.kind === 'git' && /checkout/.test(err.message)) {
        throw new SourceError(
          'SOURCE_REF_INVALID',
          `ref '${ref}' cannot be checked out from ${url}`,
          { ref },
          { cause: err },
        );
      }
      throw err;
    }
  } finally {
    await release();
  }
  return { dir, commit, origin };
}
