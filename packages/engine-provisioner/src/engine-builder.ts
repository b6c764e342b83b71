import { createWriteStream, type WriteStream } from 'node:fs';
import { chmod, copyFile, mkdir, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import type { BuildProvenance } from '@llama-orch/contracts';
import { preparePatchedTree, SourceError, type PatchSet } from '@llama-orch/llamacpp-source';
import { runCmake, type CmakeRun } from './cmake-runner.js';
import {
  BINARY_NAME,
  ENGINE_TOOLS,
  FIT_PARAMS_NAME,
  LOG_NAME,
  PROVENANCE_NAME,
  type CacheEntry,
  type EngineCacheLayout,
} from './engine-cache.js';
import { parseVersionOutput } from './engine-version.js';
import { scrubEngineEnv } from './env-scrub.js';
import { EngineProvisionError } from './errors.js';
import { probe } from './exec.js';
import { parseCmakeProgress, type EnginePhase } from './progress.js';

type Env = Readonly<Record<string, string | undefined>>;

/** What to build; everything here is already decided (policy, flags, fingerprint). */
export interface BuildRequest {
  layout: EngineCacheLayout;
  fingerprint: string;
  sourceDir: string;
  commit: string;
  /** Source label for provenance (`bundle:v0.5.0`, `git:<repo>@<ref>`). */
  origin: string;
  /** Carried patches, applied to a build-private copy of `sourceDir` (which is shared and only read). */
  patches: PatchSet;
  cmakeFlags: readonly string[];
  cuda: boolean;
  toolchain: Readonly<Record<string, string>>;
  env: Env;
  jobs: number;
  log: Logger;
  signal?: AbortSignal;
  onPhase: (phase: EnginePhase, within: number) => void;
}

function closeLog(stream: WriteStream): Promise<void> {
  return new Promise((resolve) => stream.end(resolve));
}

/** Runs `--version` on a binary (it prints to stderr) and parses the identity. */
export async function readEngineVersion(
  binaryPath: string,
  env: Env,
  signal?: AbortSignal,
): Promise<{ engineVersion: string; versionOutput: string } | { error: string }> {
  const res = await probe(binaryPath, ['--version'], { env: scrubEngineEnv(env), timeoutMs: 30_000, signal });
  const parsed = parseVersionOutput(`${res.stderr}\n${res.stdout}`);
  if (res.exitCode !== 0 || !parsed) {
    const tail = `${res.stderr}\n${res.stdout}`.trim().split('\n').slice(-5).join(' | ');
    return {
      error: `${binaryPath} --version ${res.failure ?? `exited ${String(res.exitCode)}`}${tail ? `: ${tail}` : ''}`,
    };
  }
  return parsed;
}

/**
 * Configures and builds the `llama-server` and `llama-fit-params` targets (one `cmake --build`:
 * they share libllama and common) in a staging dir under the engines root, copies both programs
 * next to their `build.json` and renames the staging dir to the cache entry. The caller
 * holds the fingerprint's lock. With patches, the source is first copied into the staging dir and
 * patched there. On failure the staging dir is removed, the log is moved to
 * `engines/failed/<fp>-<timestamp>.log`, and `BUILD_FAILED` (`PATCH_FAILED` for a patch that does
 * not apply) names it (ENGINE-PROV-CLEANUP).
 */
export async function buildEngine(req: BuildRequest): Promise<CacheEntry> {
  const { layout, fingerprint, log } = req;
  const stage = join(layout.root, `${layout.stagePrefix(fingerprint)}${process.pid}-${randomBytes(4).toString('hex')}`);
  const buildDir = join(stage, 'build');
  await mkdir(buildDir, { recursive: true });
  const logPath = join(stage, LOG_NAME);
  const logStream = createWriteStream(logPath);
  const started = performance.now();
  let logClosed = false;
  const finishLog = async (): Promise<void> => {
    if (!logClosed) {
      logClosed = true;
      await closeLog(logStream);
    }
  };

  const fail = async (phase: string, run: CmakeRun | undefined, detail: string, patch?: string): Promise<never> => {
    await finishLog();
    if (run?.aborted || req.signal?.aborted) {
      await rm(stage, { recursive: true, force: true });
      throw new EngineProvisionError('ABORTED', `engine build aborted during ${phase}`, { fingerprint, phase });
    }
    await mkdir(layout.failedDir, { recursive: true });
    const kept = join(layout.failedDir, `${fingerprint}-${new Date().toISOString().replace(/[:.]/g, '-')}.log`);
    await rename(logPath, kept).catch(() => undefined);
    await rm(stage, { recursive: true, force: true });
    const tail = run ? run.tail.slice(-8).join('\n') : '';
    log.error({ fingerprint, phase, log_path: kept, ...(patch !== undefined ? { patch } : {}) }, 'engine build failed');
    if (patch !== undefined)
      throw new EngineProvisionError('PATCH_FAILED', `llama-server ${phase} failed: ${detail}; log: ${kept}`, {
        fingerprint,
        phase,
        patch,
        logPath: kept,
      });
    throw new EngineProvisionError(
      'BUILD_FAILED',
      `llama-server ${phase} failed: ${detail}; full log: ${kept}${tail ? `\n${tail}` : ''}`,
      { fingerprint, phase, logPath: kept },
    );
  };

  try {
    logStream.write(
      `# llama-orch engine build ${fingerprint}\n# source ${req.origin} ${req.commit}\n# toolchain ${JSON.stringify(req.toolchain)}\n`,
    );
    const patchNames = req.patches.patches.map((p) => p.name);
    let sourceDir = req.sourceDir;
    if (patchNames.length > 0) {
      sourceDir = join(stage, 'src');
      try {
        await preparePatchedTree(
          { dir: req.sourceDir, commit: req.commit, origin: req.origin },
          req.patches,
          sourceDir,
          req.signal,
        );
      } catch (err) {
        const patch =
          err instanceof SourceError && err.code === 'SOURCE_PATCH_FAILED' ? String(err.context.patch) : undefined;
        await fail('patch', undefined, (err as Error).message, patch);
      }
      for (const p of req.patches.patches) logStream.write(`# patch ${p.name} sha256:${p.sha256}\n`);
      log.info({ fingerprint, patches: patchNames }, 'llama.cpp patches applied');
    }
    req.onPhase('configure', 0);
    const configure = await runCmake(['-S', sourceDir, '-B', buildDir, ...req.cmakeFlags], {
      env: req.env,
      log: logStream,
      signal: req.signal,
    });
    if (configure.exitCode !== 0)
      await fail('configure', configure, configure.failure ?? `cmake exited ${String(configure.exitCode)}`);
    req.onPhase('configure', 1);

    req.onPhase('build', 0);
    // Makefile generators count each target's steps apart: the counter restarts for the second
    // target (llama-fit-params, a few objects over what llama-server built), so report the highest
    let buildPct = 0;
    const build = await runCmake(['--build', buildDir, '--target', ...ENGINE_TOOLS, '-j', String(req.jobs)], {
      env: req.env,
      log: logStream,
      signal: req.signal,
      onLine: (line) => {
        const pct = parseCmakeProgress(line);
        if (pct !== undefined && pct > buildPct) {
          buildPct = pct;
          req.onPhase('build', pct / 100);
        }
      },
    });
    if (build.exitCode !== 0)
      await fail('build', build, build.failure ?? `cmake --build exited ${String(build.exitCode)}`);

    req.onPhase('verify', 0);
    const binaryPath = join(stage, BINARY_NAME);
    for (const tool of ENGINE_TOOLS) {
      try {
        await copyFile(join(buildDir, 'bin', tool), join(stage, tool));
        await chmod(join(stage, tool), 0o755);
      } catch (err) {
        await fail('build', undefined, `build produced no bin/${tool} (${(err as Error).message})`);
      }
    }
    // the build tree is hundreds of MB and useless once the static binary is out (so is a patched copy)
    await rm(buildDir, { recursive: true, force: true });
    if (sourceDir !== req.sourceDir) await rm(sourceDir, { recursive: true, force: true });
    const version = await readEngineVersion(binaryPath, req.env, req.signal);
    if ('error' in version) await fail('verify', undefined, version.error);
    const fitVersion = await readEngineVersion(join(stage, FIT_PARAMS_NAME), req.env, req.signal);
    if ('error' in fitVersion) await fail('verify', undefined, fitVersion.error);
    const { engineVersion, versionOutput } = version as { engineVersion: string; versionOutput: string };
    logStream.write(`# version: ${engineVersion}\n`);
    await finishLog();

    const provenance: BuildProvenance = {
      source: req.origin,
      commit: req.commit,
      cmake_flags: [...req.cmakeFlags],
      ...(patchNames.length > 0 ? { patches: patchNames } : {}),
      cuda: req.cuda,
      toolchain: { ...req.toolchain },
      build_ms: Math.round(performance.now() - started),
      version_output: versionOutput,
      built_at: new Date().toISOString(),
    };
    await writeFile(join(stage, PROVENANCE_NAME), `${JSON.stringify(provenance, null, 2)}\n`);
    const dir = layout.entryDir(fingerprint);
    // under the lock nobody else creates the entry; a leftover dir without build.json is debris
    await rm(dir, { recursive: true, force: true });
    await rename(stage, dir);
    req.onPhase('verify', 1);
    return { dir, binaryPath: join(dir, BINARY_NAME), fitParamsPath: join(dir, FIT_PARAMS_NAME), provenance };
  } catch (err) {
    await finishLog();
    await rm(stage, { recursive: true, force: true });
    if (err instanceof EngineProvisionError) throw err;
    throw new EngineProvisionError(
      'BUILD_FAILED',
      `llama-server build failed: ${(err as Error).message}`,
      { fingerprint },
      { cause: err },
    );
  }
}

/** Result of a configure-only run. */
export interface ConfigureResult {
  buildDir: string;
  cmakeFlags: string[];
  /** CMake's output (also in `<buildDir>/configure.log`). */
  logPath: string;
  durationMs: number;
}

/** Runs only cmake's configure step into `buildDir` (kept for inspection); `BUILD_FAILED` on error. */
export async function configureEngine(req: {
  sourceDir: string;
  buildDir: string;
  cmakeFlags: readonly string[];
  env: Env;
  signal?: AbortSignal;
}): Promise<ConfigureResult> {
  await mkdir(req.buildDir, { recursive: true });
  const logPath = join(req.buildDir, 'configure.log');
  const logStream = createWriteStream(logPath);
  const started = performance.now();
  const run = await runCmake(['-S', req.sourceDir, '-B', req.buildDir, ...req.cmakeFlags], {
    env: req.env,
    log: logStream,
    signal: req.signal,
  });
  await closeLog(logStream);
  if (run.aborted) throw new EngineProvisionError('ABORTED', 'cmake configure aborted', {});
  if (run.exitCode !== 0) {
    throw new EngineProvisionError(
      'BUILD_FAILED',
      `cmake configure failed (${run.failure ?? `exit ${String(run.exitCode)}`}); log: ${logPath}\n${run.tail.slice(-8).join('\n')}`,
      {
        phase: 'configure',
        logPath,
      },
    );
  }
  return {
    buildDir: req.buildDir,
    cmakeFlags: [...req.cmakeFlags],
    logPath,
    durationMs: Math.round(performance.now() - started),
  };
}
