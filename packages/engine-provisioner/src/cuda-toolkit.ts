import { access, readdir, stat } from 'node:fs/promises';
import { constants } from 'node:fs';
import { delimiter, dirname, join, normalize } from 'node:path';
import { probe } from './exec.js';

/** A CUDA toolkit found on this host. */
export interface CudaToolkit {
  /** Absolute path of `nvcc` as found (may be a wrapper script; CMake follows it). */
  nvccPath: string;
  /** Where it was found: `PATH`, `CUDA_HOME`, `CUDA_PATH` or `search:<root>`. */
  foundVia: string;
  /** `nvcc --version` release, e.g. `13.0.88`. */
  version: string;
  /** Toolkit root as nvcc reports it (`TOP`), e.g. `/usr/local/cuda-13.0`. */
  root: string;
  /**
   * Parts a llama.cpp CUDA build links that this toolkit lacks (e.g. `cuBLAS (cublas_v2.h)`).
   * Non-empty means CMake's configure would fail; `gpu: required` reports them as
   * `GPU_TOOLKIT_MISSING` instead of an obscure CMake error.
   */
  missing: string[];
}

/** Where a failed lookup looked, for the error message. */
export interface CudaLookupReport {
  toolkit?: CudaToolkit;
  /** Every nvcc candidate path that was tried, in order. */
  tried: string[];
}

/** Roots scanned for `cuda*` directories when neither PATH nor CUDA_HOME/CUDA_PATH has nvcc. */
export const DEFAULT_CUDA_SEARCH_ROOTS: readonly string[] = Object.freeze(['/usr/local', '/opt']);

async function isExecutableFile(path: string): Promise<boolean> {
  try {
    const s = await stat(path);
    if (!s.isFile()) return false;
    await access(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** `cuda` first (the distro/installer symlink), then versioned dirs, newest first. */
function compareCudaDirs(a: string, b: string): number {
  if (a === 'cuda') return -1;
  if (b === 'cuda') return 1;
  return b.localeCompare(a, 'en', { numeric: true });
}

async function candidates(
  env: Readonly<Record<string, string | undefined>>,
  searchRoots: readonly string[],
): Promise<Array<{ path: string; via: string }>> {
  const out: Array<{ path: string; via: string }> = [];
  for (const dir of (env.PATH ?? '').split(delimiter)) {
    if (dir) out.push({ path: join(dir, 'nvcc'), via: 'PATH' });
  }
  for (const name of ['CUDA_HOME', 'CUDA_PATH'] as const) {
    const root = env[name];
    if (root) out.push({ path: join(root, 'bin', 'nvcc'), via: name });
  }
  for (const root of searchRoots) {
    const entries = await readdir(root).catch(() => [] as string[]);
    for (const name of entries.filter((e) => /^cuda(-[0-9.]+)?$/.test(e)).sort(compareCudaDirs)) {
      out.push({ path: join(root, name, 'bin', 'nvcc'), via: `search:${root}` });
    }
  }
  return out;
}

/**
 * Finds a CUDA toolkit the way operators expect: `nvcc` on `PATH`, then `$CUDA_HOME/bin/nvcc`,
 * `$CUDA_PATH/bin/nvcc`, then `<root>/cuda*\/bin/nvcc` under each search root. A candidate counts
 * only if `nvcc --version` runs and reports a release.
 *
 * Everything it reads comes from `env` and `searchRoots`, so callers (and tests) can describe a
 * host without CUDA on a host that has it.
 *
 * @param searchRoots @default DEFAULT_CUDA_SEARCH_ROOTS (`/usr/local`, `/opt`)
 */
export async function findCudaToolkit(
  env: Readonly<Record<string, string | undefined>>,
  searchRoots: readonly string[] = DEFAULT_CUDA_SEARCH_ROOTS,
): Promise<CudaToolkit | undefined> {
  return (await lookupCudaToolkit(env, searchRoots)).toolkit;
}

/** {@link findCudaToolkit} plus the list of places it tried (for `GPU_TOOLKIT_MISSING` messages). */
export async function lookupCudaToolkit(
  env: Readonly<Record<string, string | undefined>>,
  searchRoots: readonly string[] = DEFAULT_CUDA_SEARCH_ROOTS,
): Promise<CudaLookupReport> {
  const tried: string[] = [];
  const seen = new Set<string>();
  for (const c of await candidates(env, searchRoots)) {
    if (seen.has(c.path)) continue;
    seen.add(c.path);
    tried.push(c.path);
    if (!(await isExecutableFile(c.path))) continue;
    // nvcc needs its own bin dir on PATH for its helpers when it is invoked by absolute path
    const res = await probe(c.path, ['--version'], {
      env: { ...env, PATH: [dirname(c.path), env.PATH ?? ''].filter(Boolean).join(delimiter) },
      timeoutMs: 30_000,
    });
    const m = /release\s+[0-9.]+,\s*V([0-9.]+)/.exec(res.stdout) ?? /release\s+([0-9.]+)/.exec(res.stdout);
    if (res.exitCode === 0 && m?.[1]) {
      const layout = await toolkitLayout(c.path, env);
      return {
        toolkit: {
          nvccPath: c.path,
          foundVia: c.via,
          version: m[1],
          root: layout.root,
          missing: await missingComponents(layout),
        },
        tried,
      };
    }
  }
  return { tried };
}

interface ToolkitLayout {
  root: string;
  includeDirs: string[];
  libDirs: string[];
}

/**
 * Where nvcc itself looks for headers and libraries: `nvcc --dryrun` prints `TOP`, `INCLUDES` and
 * `LIBRARIES` without compiling anything (wrapper scripts such as `/usr/local/bin/nvcc` resolve
 * to the real toolkit this way). Falls back to `<nvcc>/../..`.
 */
async function toolkitLayout(
  nvccPath: string,
  env: Readonly<Record<string, string | undefined>>,
): Promise<ToolkitLayout> {
  const res = await probe(nvccPath, ['--dryrun', '-c', '/nonexistent/llorch-probe.cu', '-o', '/dev/null'], {
    env: { ...env, PATH: [dirname(nvccPath), env.PATH ?? ''].filter(Boolean).join(delimiter) },
    timeoutMs: 30_000,
  });
  const out = `${res.stdout}\n${res.stderr}`;
  const top = /^#\$ TOP=(.+)$/m.exec(out)?.[1]?.trim();
  const root = normalize(top ?? join(dirname(nvccPath), '..'));
  const includes = /^#\$ INCLUDES=(.*)$/m.exec(out)?.[1] ?? '';
  const libraries = /^#\$ LIBRARIES=(.*)$/m.exec(out)?.[1] ?? '';
  const flagDirs = (text: string, flag: string) =>
    [...text.matchAll(new RegExp(`"?${flag}([^"\\s]+)"?`, 'g'))].map((x) => normalize(x[1] as string));
  return {
    root,
    includeDirs: [...new Set([...flagDirs(includes, '-I'), join(root, 'include')])],
    libDirs: [...new Set([...flagDirs(libraries, '-L'), join(root, 'lib64'), join(root, 'lib')])],
  };
}

/** Named in `missing` when neither the driver's nor the toolkit's stub `libcuda.so` exists. */
export const CUDA_DRIVER_COMPONENT = 'CUDA driver library (libcuda.so, or the toolkit stub lib/stubs/libcuda.so)';
const SYSTEM_LIB_DIRS = ['/usr/lib/x86_64-linux-gnu', '/usr/lib/aarch64-linux-gnu', '/usr/lib64', '/usr/lib'];

async function anyFile(dirs: readonly string[], match: (name: string) => boolean): Promise<boolean> {
  for (const dir of dirs) {
    const names = await readdir(dir).catch(() => [] as string[]);
    if (names.some(match)) return true;
  }
  return false;
}

/** What ggml's CUDA backend needs from the toolkit besides nvcc (runtime and cuBLAS). */
async function missingComponents(layout: ToolkitLayout): Promise<string[]> {
  const missing: string[] = [];
  if (!(await anyFile(layout.includeDirs, (n) => n === 'cuda_runtime.h')))
    missing.push('CUDA runtime headers (cuda_runtime.h)');
  if (!(await anyFile(layout.libDirs, (n) => /^libcudart(\.so|_static\.a)/.test(n))))
    missing.push('CUDA runtime library (libcudart)');
  if (!(await anyFile(layout.includeDirs, (n) => n === 'cublas_v2.h'))) missing.push('cuBLAS headers (cublas_v2.h)');
  if (!(await anyFile(layout.libDirs, (n) => /^libcublas(\.so|_static\.a)/.test(n))))
    missing.push('cuBLAS library (libcublas)');
  // the driver library comes with the NVIDIA driver, or as a link stub inside the toolkit
  const driverDirs = [...layout.libDirs, ...layout.libDirs.map((d) => join(d, 'stubs')), ...SYSTEM_LIB_DIRS];
  if (!(await anyFile(driverDirs, (n) => n === 'libcuda.so'))) missing.push(CUDA_DRIVER_COMPONENT);
  return missing;
}
