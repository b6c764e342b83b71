/**
 * Stable error codes of the engine provisioner. Callers branch on `code` (or the class), never on
 * message text.
 *
 * - `CONFIG_INVALID`: the pool-managerd config or a pool's settings are wrong (every problem listed).
 * - `GPU_TOOLKIT_MISSING`: `gpu: required` and no CUDA toolkit (`nvcc`) was found. Never downgraded
 *   to a CPU build (ENGINE-PROV-GPU-ENFORCE).
 * - `SOURCE_NOT_FOUND`: the llama.cpp bundle / repository does not exist.
 * - `SOURCE_REF_INVALID`: the git ref does not exist in the repository.
 * - `SOURCE_FETCH_FAILED`: git failed for another reason (network, corrupt repository).
 * - `BUILD_FAILED`: cmake configure/build failed or the result does not run; `context.logPath`
 *   names the kept build log.
 * - `PATCH_FAILED`: a carried llama.cpp patch does not apply to the source; `context.patch` names
 *   it (a build error: nothing was configured or compiled).
 * - `EXTERNAL_BINARY_INVALID`: an `external` binary is missing, not executable, or its
 *   `--version` is not llama-server's.
 * - `CACHE_UNWRITABLE`: the cache directory cannot be created or written.
 * - `TOOL_MISSING`: `cmake`, `git` or a C++ compiler is not installed.
 * - `MEMORY_PROJECTION_FAILED`: `llama-fit-params` did not project a model's memory;
 *   `context.reason` says how: `spawn` (it could not start), `exit` (non-zero exit or killed by a
 *   signal: unreadable model, an argument it does not take, a crash), `timeout`, `output` (a table
 *   this package does not read). `context.stderr` holds its last lines.
 * - `ABORTED`: the caller's AbortSignal fired.
 */
export type EngineProvisionErrorCode =
  | 'CONFIG_INVALID'
  | 'GPU_TOOLKIT_MISSING'
  | 'SOURCE_NOT_FOUND'
  | 'SOURCE_REF_INVALID'
  | 'SOURCE_FETCH_FAILED'
  | 'BUILD_FAILED'
  | 'PATCH_FAILED'
  | 'EXTERNAL_BINARY_INVALID'
  | 'CACHE_UNWRITABLE'
  | 'TOOL_MISSING'
  | 'MEMORY_PROJECTION_FAILED'
  | 'ABORTED';

/** Every failure of the provisioner; `context` carries facts such as `poolId`, `logPath`, `missing`. */
export class EngineProvisionError extends Error {
  override readonly name = 'EngineProvisionError';
  constructor(
    readonly code: EngineProvisionErrorCode,
    message: string,
    readonly context: Readonly<Record<string, unknown>> = {},
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}
