import { mkdir, readFile, readdir, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import lockfile from 'proper-lockfile';
import type { Logger } from 'pino';
import { BuildProvenanceSchema, type BuildProvenance } from '@llama-orch/contracts';
import { EngineProvisionError } from './errors.js';

/** Name of the binary inside a cache entry. */
export const BINARY_NAME = 'llama-server';
/**
 * llama.cpp's memory projection tool, built with the server and kept beside it (`--fit-print on`
 * prints what a model, context and compute buffers take per device: see memory-projection.ts).
 */
export const FIT_PARAMS_NAME = 'llama-fit-params';
/** Every program a cache entry holds, in build-target order. */
export const ENGINE_TOOLS = [BINARY_NAME, FIT_PARAMS_NAME] as const;
/** Provenance file inside a cache entry. */
export const PROVENANCE_NAME = 'build.json';
/** Build log inside a cache entry (kept for operators). */
export const LOG_NAME = 'build.log';

/** Paths of the engine cache under one cache root. */
export interface EngineCacheLayout {
  /** `<cacheDir>/engines` */
  root: string;
  /** `<cacheDir>/engines/failed`: logs of failed builds. */
  failedDir: string;
  entryDir(fingerprint: string): string;
  lockPath(fingerprint: string): string;
  /** Prefix of staging dirs for one fingerprint (`.tmp-<fp>-…`); complete ones are renamed to entryDir. */
  stagePrefix(fingerprint: string): string;
}

export function engineCacheLayout(cacheDir: string): EngineCacheLayout {
  const root = join(cacheDir, 'engines');
  return {
    root,
    failedDir: join(root, 'failed'),
    entryDir: (fp) => join(root, fp),
    lockPath: (fp) => join(root, `${fp}.lock`),
    stagePrefix: (fp) => `.tmp-${fp}-`,
  };
}

/** Creates the engines dir or fails with `CACHE_UNWRITABLE` (file in the way, read-only mount, permissions). */
export async function ensureCacheWritable(layout: EngineCacheLayout): Promise<void> {
  try {
    await mkdir(layout.root, { recursive: true });
    const probeDir = join(layout.root, `.probe-${process.pid}-${Math.random().toString(36).slice(2)}`);
    await mkdir(probeDir);
    await rm(probeDir, { recursive: true, force: true });
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? 'unknown';
    throw new EngineProvisionError(
      'CACHE_UNWRITABLE',
      `engine cache ${layout.root} is not writable (${code}); set cache_dir to a writable directory`,
      { path: layout.root, errno: code },
      { cause: err },
    );
  }
}

/** A complete cache entry. */
export interface CacheEntry {
  dir: string;
  binaryPath: string;
  /** `llama-fit-params` beside the server (every entry of this recipe has it). */
  fitParamsPath: string;
  provenance: BuildProvenance;
}

/**
 * The entry for `fingerprint` when it is complete. Entries appear only by rename of a finished
 * staging dir, so existence means complete; a `build.json` that does not parse, or a program of
 * {@link ENGINE_TOOLS} that is gone, means someone edited the cache, and the entry is treated as
 * absent (it is rebuilt under the lock).
 */
export async function readCacheEntry(
  layout: EngineCacheLayout,
  fingerprint: string,
  log: Logger,
): Promise<CacheEntry | undefined> {
  const dir = layout.entryDir(fingerprint);
  let raw: string;
  try {
    raw = await readFile(join(dir, PROVENANCE_NAME), 'utf8');
  } catch {
    return undefined;
  }
  const binaryPath = join(dir, BINARY_NAME);
  const fitParamsPath = join(dir, FIT_PARAMS_NAME);
  const parsed = BuildProvenanceSchema.safeParse(safeJson(raw));
  const [binary, fitParams] = await Promise.all([binaryPath, fitParamsPath].map((p) => stat(p).catch(() => undefined)));
  if (!parsed.success || !binary?.isFile() || !fitParams?.isFile()) {
    log.warn({ dir }, 'engine cache entry is damaged; it will be rebuilt');
    return undefined;
  }
  return { dir, binaryPath, fitParamsPath, provenance: parsed.data };
}

function safeJson(raw: string): unknown {
  try {
    return JSON.parse(raw) as unknown;
  } catch {
    return undefined;
  }
}

/**
 * Takes the cross-process build lock of one fingerprint, waiting (abortably) while another
 * process holds it. proper-lockfile refreshes the lock's mtime while we hold it, so a lock left by
 * a killed process goes stale after `staleMs` and is taken over.
 */
export async function acquireBuildLock(
  layout: EngineCacheLayout,
  fingerprint: string,
  opts: { log: Logger; signal?: AbortSignal; staleMs?: number; onCompromised: (err: Error) => void },
): Promise<() => Promise<void>> {
  let announced = false;
  for (;;) {
    opts.signal?.throwIfAborted();
    try {
      // proper-lockfile keys held locks by the locked path, so each fingerprint locks its own
      // (non-existent) path: locking the shared root twice in one process would mix up releases
      return await lockfile.lock(join(layout.root, fingerprint), {
        lockfilePath: layout.lockPath(fingerprint),
        stale: opts.staleMs ?? 30_000,
        update: 5_000,
        retries: 0,
        realpath: false,
        onCompromised: opts.onCompromised,
      });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ELOCKED') throw err;
      if (!announced) {
        opts.log.info({ fingerprint }, 'another process is building this engine; waiting for it');
        announced = true;
      }
      // a referenced timer: this wait is what keeps a CLI process alive while another builds
      await sleep(1000, undefined, { signal: opts.signal });
    }
  }
}

/** Removes staging dirs of `fingerprint` left by killed builders; call only while holding its lock. */
export async function removeStaleStages(layout: EngineCacheLayout, fingerprint: string): Promise<void> {
  const prefix = layout.stagePrefix(fingerprint);
  const entries = await readdir(layout.root).catch(() => [] as string[]);
  await Promise.all(
    entries.filter((e) => e.startsWith(prefix)).map((e) => rm(join(layout.root, e), { recursive: true, force: true })),
  );
}
