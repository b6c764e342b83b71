import { existsSync } from 'node:fs';
import { mkdtemp, readFile, readdir, rm, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { execa } from 'execa';
import pino from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { PoolConfigSchema } from '@llama-orch/contracts';
import { findCudaToolkit } from './cuda-toolkit.js';
import { ENGINE_TOOLS } from './engine-cache.js';
import { EngineProvisionError } from './errors.js';
import { EngineProvisioner } from './provisioner.js';
import { cpuTestPool, testCacheDir } from './testing.js';

// CUDA on hosts without a GPU: the development and CI machines have nvcc (CUDA 13, from NVIDIA's
// pip wheels, under /usr/local/cuda) but not cuBLAS or libcuda. A CUDA build can therefore only be
// configured, never run, and only once cuBLAS is present. These tests use the real nvcc and the
// real llama.cpp tree (from the shared test cache); compiling CUDA is too slow here.

const HOST_NVCC = '/usr/local/cuda/bin/nvcc';
/** The cuBLAS wheel present on these machines; `LLORCH_CUBLAS_WHEEL` names another. */
async function findCublasWheel(): Promise<string | undefined> {
  const fromEnv = process.env.LLORCH_CUBLAS_WHEEL;
  if (fromEnv) return existsSync(fromEnv) ? fromEnv : undefined;
  const dir = '/opt/pypi-more/files';
  const names = await readdir(dir).catch(() => [] as string[]);
  const whl = names.find((n) => /^nvidia_cublas-13\..*x86_64\.whl$/.test(n));
  return whl ? join(dir, whl) : undefined;
}

const dirs: string[] = [];
afterAll(async () => {
  await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })));
});
const quiet = pino({ level: 'silent' });
const CONFIGURE_TIMEOUT = 15 * 60_000;

/** PATH without any directory that holds an nvcc, so only CUDA_HOME can point at a toolkit. */
function pathWithoutNvcc(): string {
  return (process.env.PATH ?? '')
    .split(delimiter)
    .filter((d) => d && !existsSync(join(d, 'nvcc')))
    .join(delimiter);
}

describe.runIf(existsSync(HOST_NVCC))('CUDA with the real nvcc', () => {
  it(
    'gpu: required with the host toolkit configures when it is complete, else names what is missing',
    async () => {
      const tk = await findCudaToolkit(process.env);
      expect(tk).toBeDefined();
      const prov = new EngineProvisioner({ cacheDir: testCacheDir(), logger: quiet, env: process.env });
      const pool = PoolConfigSchema.parse({ ...(await cpuTestPool()), id: 'gpu0', gpu: 'required' });
      const buildDir = await mkdtemp(join(tmpdir(), 'llorch-cuda-host-'));
      dirs.push(buildDir);
      if (tk && tk.missing.length > 0) {
        const err = await prov.configureOnly(pool, { buildDir }).then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(err).toBeInstanceOf(EngineProvisionError);
        expect((err as EngineProvisionError).code).toBe('GPU_TOOLKIT_MISSING');
        for (const m of tk.missing) expect((err as Error).message).toContain(m);
        // nothing was configured: the failure comes before cmake
        expect(existsSync(join(buildDir, 'CMakeCache.txt'))).toBe(false);
      } else {
        const res = await prov.configureOnly(pool, { buildDir });
        expect(res.cuda).toBe(true);
        expect(await readFile(join(buildDir, 'CMakeCache.txt'), 'utf8')).toMatch(/^GGML_CUDA:BOOL=ON$/m);
      }
    },
    CONFIGURE_TIMEOUT,
  );

  it(
    'gpu: required configures llama.cpp with GGML_CUDA=ON against nvcc + cuBLAS',
    async (ctx) => {
      const wheel = await findCublasWheel();
      if (!wheel) ctx.skip('no cuBLAS wheel on this host (set LLORCH_CUBLAS_WHEEL)');
      const host = await findCudaToolkit(process.env);
      if (!host) throw new Error('nvcc vanished');
      // a toolkit = this host's nvcc tree (hard links, cheap) + cuBLAS from NVIDIA's wheel
      const work = await mkdtemp(join(tmpdir(), 'llorch-cudakit-'));
      dirs.push(work);
      const root = join(work, 'cuda');
      const cp = await execa('cp', ['-al', host.root, root], { reject: false });
      if (cp.exitCode !== 0) await execa('cp', ['-a', host.root, root]);
      await execa('unzip', [
        '-q',
        '-o',
        wheel as string,
        'nvidia/cu13/include/*',
        'nvidia/cu13/lib/libcublas.so.13',
        'nvidia/cu13/lib/libcublasLt.so.13',
        '-d',
        join(work, 'wheel'),
      ]);
      const target = join(root, 'targets', 'x86_64-linux');
      await execa('sh', [
        '-c',
        `cp ${join(work, 'wheel/nvidia/cu13/include')}/* ${join(target, 'include')}/ && cp ${join(work, 'wheel/nvidia/cu13/lib')}/* ${join(target, 'lib')}/`,
      ]);
      await symlink('libcublas.so.13', join(target, 'lib', 'libcublas.so'));
      await symlink('libcublasLt.so.13', join(target, 'lib', 'libcublasLt.so'));

      const env: Record<string, string | undefined> = { ...process.env, PATH: pathWithoutNvcc(), CUDA_HOME: root };
      delete env.CUDA_PATH;
      const prov = new EngineProvisioner({ cacheDir: testCacheDir(), logger: quiet, env, cudaSearchRoots: [] });
      // no libcuda (driver or stub) here: build without VMM, which is what links it
      const pool = PoolConfigSchema.parse({
        ...(await cpuTestPool()),
        id: 'gpu0',
        gpu: 'required',
        cuda_architectures: '90',
        build_flags: ['-DGGML_CUDA_NO_VMM=ON'],
      });
      const buildDir = join(work, 'build');
      const res = await prov.configureOnly(pool, { buildDir });
      expect(res.cuda).toBe(true);
      expect(res.cmakeFlags).toEqual(
        expect.arrayContaining([
          '-DGGML_CUDA=ON',
          '-DCMAKE_CUDA_ARCHITECTURES=90',
          `-DCMAKE_CUDA_COMPILER=${join(root, 'bin', 'nvcc')}`,
          `-DCUDAToolkit_ROOT=${root}`,
        ]),
      );
      const cache = await readFile(join(buildDir, 'CMakeCache.txt'), 'utf8');
      expect(cache).toMatch(/^GGML_CUDA:BOOL=ON$/m);
      expect(cache).toMatch(/^CMAKE_CUDA_ARCHITECTURES:\w+=90$/m);
      expect(cache).toContain(`CMAKE_CUDA_COMPILER:STRING=${join(root, 'bin', 'nvcc')}`);
      expect(cache).toMatch(/^CUDA_cublas_LIBRARY:FILEPATH=.*libcublas\.so$/m);
      expect(await readFile(res.logPath, 'utf8')).toMatch(/Including CUDA backend/);
      // the CUDA tree has both programs a build makes (the server and the memory projection tool)
      const makefile = await readFile(join(buildDir, 'Makefile'), 'utf8');
      for (const tool of ENGINE_TOOLS) expect(makefile).toMatch(new RegExp(`^${tool}: `, 'm'));
    },
    CONFIGURE_TIMEOUT,
  );
});
