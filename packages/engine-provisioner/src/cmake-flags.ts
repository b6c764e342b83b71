import type { PoolConfig } from '@llama-orch/contracts';
import type { CudaToolkit } from './cuda-toolkit.js';
import { EngineProvisionError } from './errors.js';

/**
 * Flags this package decides itself; a pool's `build_flags` may not set them, because doing so
 * would silently contradict the pool's `gpu`/`native` policy or the self-contained binary.
 */
const MANAGED_CMAKE_VARS = new Set([
  'GGML_CUDA',
  'CMAKE_CUDA_ARCHITECTURES',
  'CMAKE_CUDA_COMPILER',
  'CUDAToolkit_ROOT',
  'GGML_NATIVE',
  'BUILD_SHARED_LIBS',
]);

/**
 * CMake `-D` flags for a llama-server build of `pool`, in order (the order is part of the
 * fingerprint). `cuda` is the toolkit to build against, or undefined for a CPU build; the GPU
 * policy decision is made by the caller.
 *
 * - `BUILD_SHARED_LIBS=OFF`: one self-contained executable that can be copied into the cache
 *   (shared builds carry an absolute RUNPATH to the build dir).
 * - `LLAMA_USE_PREBUILT_UI=OFF`: no configure-time download from huggingface.co (offline hosts).
 * - `LLAMA_OPENSSL=OFF`: the engine never downloads; no libssl dependency.
 */
export function cmakeFlagsFor(pool: PoolConfig, cuda: CudaToolkit | undefined): string[] {
  const conflicts = pool.build_flags.filter((f) => MANAGED_CMAKE_VARS.has(f.slice(2).split('=')[0] ?? ''));
  if (conflicts.length > 0) {
    throw new EngineProvisionError(
      'CONFIG_INVALID',
      `pools[${pool.id}].build_flags may not set ${conflicts.join(', ')}: use the pool's gpu / cuda_architectures / native settings`,
      { poolId: pool.id, conflicts },
    );
  }
  const flags = [
    '-DCMAKE_BUILD_TYPE=Release',
    '-DBUILD_SHARED_LIBS=OFF',
    '-DLLAMA_BUILD_TESTS=OFF',
    '-DLLAMA_BUILD_EXAMPLES=OFF',
    '-DLLAMA_USE_PREBUILT_UI=OFF',
    '-DLLAMA_OPENSSL=OFF',
    `-DGGML_NATIVE=${pool.native ? 'ON' : 'OFF'}`,
  ];
  if (cuda) {
    // CUDAToolkit_ROOT too: FindCUDAToolkit runs before the CUDA language is enabled and would
    // otherwise pick /usr/local/cuda even when CMAKE_CUDA_COMPILER names another toolkit
    flags.push(
      '-DGGML_CUDA=ON',
      `-DCMAKE_CUDA_ARCHITECTURES=${pool.cuda_architectures}`,
      `-DCMAKE_CUDA_COMPILER=${cuda.nvccPath}`,
      `-DCUDAToolkit_ROOT=${cuda.root}`,
    );
  } else {
    flags.push('-DGGML_CUDA=OFF');
  }
  return [...flags, ...pool.build_flags];
}
