import { createHash } from 'node:crypto';

/** Everything that makes two builds different binaries. */
export interface FingerprintInputs {
  /** Full llama.cpp commit hash. */
  commit: string;
  /** CMake flags in order. */
  cmakeFlags: readonly string[];
  /** First line of the C++ compiler's `--version`. */
  compiler: string;
  /** nvcc release, when CUDA is compiled in. */
  cudaVersion?: string | undefined;
  /** CPU identity, only for `GGML_NATIVE=ON` builds (native code is tied to the CPU). */
  cpu?: string | undefined;
  /** Hash of the carried patch set applied before the build; absent when none is. */
  patches?: string | undefined;
}

/**
 * Bumped when the layout of a cache entry or the build recipe changes incompatibly, so entries of
 * the old recipe are never found again (they stay on disk, unused). 2: an entry holds
 * `llama-fit-params` beside `llama-server`.
 */
const RECIPE_VERSION = 2;

/** sha256 (hex) of the inputs: the cache key `<cacheDir>/engines/<fingerprint>/`. */
export function engineFingerprint(inputs: FingerprintInputs): string {
  const canonical = JSON.stringify({
    recipe: RECIPE_VERSION,
    commit: inputs.commit,
    cmake_flags: inputs.cmakeFlags,
    compiler: inputs.compiler,
    cuda: inputs.cudaVersion ?? null,
    cpu: inputs.cpu ?? null,
    // only when patched, so an unpatched build keeps the key it had before patches existed
    ...(inputs.patches !== undefined ? { patches: inputs.patches } : {}),
  });
  return createHash('sha256').update(canonical).digest('hex');
}
