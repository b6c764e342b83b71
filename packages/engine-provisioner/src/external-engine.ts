import { createHash } from 'node:crypto';
import { constants } from 'node:fs';
import { access, readFile, readdir, stat } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import type { BuildProvenance } from '@llama-orch/contracts';
import { readEngineVersion } from './engine-builder.js';
import { FIT_PARAMS_NAME } from './engine-cache.js';
import { EngineProvisionError } from './errors.js';

type Env = Readonly<Record<string, string | undefined>>;

/** An operator-supplied binary, verified. */
export interface ExternalEngine {
  binaryPath: string;
  /** An executable `llama-fit-params` next to the binary (as in a llama.cpp build's `bin/`), if any. */
  fitParamsPath?: string;
  engineVersion: string;
  /** sha256 of the binary's bytes: the same file gives the same fingerprint. */
  fingerprint: string;
  provenance: BuildProvenance;
}

/** A string only ggml's CUDA backend puts in a binary (its init function's log tag). */
const CUDA_MARKER = Buffer.from('ggml_cuda_init');

/**
 * Whether the CUDA backend is in the binary: statically linked (the marker is in the executable)
 * or as a `libggml-cuda.so*` next to it (shared builds).
 */
async function hasCuda(binaryPath: string, bytes: Buffer): Promise<boolean> {
  if (bytes.includes(CUDA_MARKER)) return true;
  const siblings = await readdir(dirname(binaryPath)).catch(() => [] as string[]);
  return siblings.some((f) => f.startsWith('libggml-cuda.so'));
}

/** `llama-fit-params` beside `binaryPath` when it is an executable file; taken as it is, not run. */
async function siblingFitParams(binaryPath: string): Promise<string | undefined> {
  const path = join(dirname(binaryPath), FIT_PARAMS_NAME);
  const st = await stat(path).catch(() => undefined);
  if (!st?.isFile()) return undefined;
  return access(path, constants.X_OK).then(
    () => path,
    () => undefined,
  );
}

/**
 * Verifies an `external` source: the file exists, is executable, and `--version` (stderr) reports
 * a llama.cpp version. `EXTERNAL_BINARY_INVALID` otherwise.
 */
export async function verifyExternalEngine(path: string, env: Env, signal?: AbortSignal): Promise<ExternalEngine> {
  const binaryPath = resolve(path);
  const st = await stat(binaryPath).catch(() => undefined);
  if (!st?.isFile()) {
    throw new EngineProvisionError('EXTERNAL_BINARY_INVALID', `external llama-server not found: ${binaryPath}`, {
      path: binaryPath,
    });
  }
  try {
    await access(binaryPath, constants.X_OK);
  } catch {
    throw new EngineProvisionError(
      'EXTERNAL_BINARY_INVALID',
      `external llama-server is not executable: ${binaryPath}`,
      { path: binaryPath },
    );
  }
  const version = await readEngineVersion(binaryPath, env, signal);
  if ('error' in version) {
    throw new EngineProvisionError(
      'EXTERNAL_BINARY_INVALID',
      `external binary is not a working llama-server: ${version.error}`,
      { path: binaryPath },
    );
  }
  const bytes = await readFile(binaryPath);
  const fitParamsPath = await siblingFitParams(binaryPath);
  return {
    binaryPath,
    ...(fitParamsPath !== undefined ? { fitParamsPath } : {}),
    engineVersion: version.engineVersion,
    fingerprint: createHash('sha256').update(bytes).digest('hex'),
    provenance: {
      source: 'external',
      cmake_flags: [],
      cuda: await hasCuda(binaryPath, bytes),
      toolchain: {},
      build_ms: 0,
      version_output: version.versionOutput,
      built_at: st.mtime.toISOString(),
    },
  };
}
