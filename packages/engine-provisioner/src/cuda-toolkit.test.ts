import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { mkdir, writeFile } from 'node:fs/promises';
import { CUDA_DRIVER_COMPONENT, findCudaToolkit, lookupCudaToolkit } from './cuda-toolkit.js';
import { writeScript } from './fixtures/fixture-source.js';

const dirs: string[] = [];
afterAll(async () => {
  await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })));
});
async function temp(): Promise<string> {
  const d = await mkdtemp(join(tmpdir(), 'llorch-cuda-'));
  dirs.push(d);
  return d;
}
const FAKE_NVCC =
  'echo "nvcc: NVIDIA (R) Cuda compiler driver"; echo "Cuda compilation tools, release 12.4, V12.4.131"';

describe('findCudaToolkit', () => {
  it('finds nothing with an empty PATH, no CUDA_HOME and an empty search root', async () => {
    const root = await temp();
    const report = await lookupCudaToolkit({ PATH: '' }, [root]);
    expect(report.toolkit).toBeUndefined();
    expect(await findCudaToolkit({}, [root])).toBeUndefined();
  });

  it('finds nvcc under a search root, preferring cuda over versioned dirs', async () => {
    const root = await temp();
    await writeScript(join(root, 'cuda-11.8', 'bin', 'nvcc'), 'echo "Cuda compilation tools, release 11.8, V11.8.89"');
    await writeScript(join(root, 'cuda', 'bin', 'nvcc'), FAKE_NVCC);
    const tk = await findCudaToolkit({ PATH: '' }, [root]);
    expect(tk).toMatchObject({
      nvccPath: join(root, 'cuda', 'bin', 'nvcc'),
      foundVia: `search:${root}`,
      version: '12.4.131',
      root: join(root, 'cuda'),
    });
  });

  it('reports what a partial toolkit lacks (nvcc alone is not enough for ggml-cuda)', async () => {
    const root = await temp();
    const cuda = join(root, 'cuda');
    await writeScript(join(cuda, 'bin', 'nvcc'), FAKE_NVCC);
    expect((await findCudaToolkit({ PATH: '' }, [root]))?.missing).toEqual([
      'CUDA runtime headers (cuda_runtime.h)',
      'CUDA runtime library (libcudart)',
      'cuBLAS headers (cublas_v2.h)',
      'cuBLAS library (libcublas)',
      ...(existsSync('/usr/lib/x86_64-linux-gnu/libcuda.so') || existsSync('/usr/lib64/libcuda.so')
        ? []
        : [CUDA_DRIVER_COMPONENT]),
    ]);
    await mkdir(join(cuda, 'include'), { recursive: true });
    await mkdir(join(cuda, 'lib64', 'stubs'), { recursive: true });
    for (const f of [
      'include/cuda_runtime.h',
      'include/cublas_v2.h',
      'lib64/libcudart.so',
      'lib64/libcublas.so',
      'lib64/stubs/libcuda.so',
    ]) {
      await writeFile(join(cuda, f), '');
    }
    expect((await findCudaToolkit({ PATH: '' }, [root]))?.missing).toEqual([]);
  });

  it('takes PATH first, then CUDA_HOME/CUDA_PATH', async () => {
    const d = await temp();
    const onPath = await writeScript(join(d, 'pathbin', 'nvcc'), FAKE_NVCC);
    const home = await writeScript(join(d, 'home', 'bin', 'nvcc'), FAKE_NVCC);
    const viaPath = await findCudaToolkit({ PATH: join(d, 'pathbin'), CUDA_HOME: join(d, 'home') }, []);
    expect(viaPath?.nvccPath).toBe(onPath);
    expect(viaPath?.foundVia).toBe('PATH');
    const viaHome = await findCudaToolkit({ PATH: join(d, 'nothing'), CUDA_HOME: join(d, 'home') }, []);
    expect(viaHome).toMatchObject({ nvccPath: home, foundVia: 'CUDA_HOME' });
    const viaCudaPath = await findCudaToolkit({ CUDA_PATH: join(d, 'home') }, []);
    expect(viaCudaPath).toMatchObject({ nvccPath: home, foundVia: 'CUDA_PATH' });
  });

  it('skips an nvcc that does not run or does not report a release', async () => {
    const d = await temp();
    await writeScript(join(d, 'broken', 'nvcc'), 'exit 1');
    await writeScript(join(d, 'liar', 'nvcc'), 'echo hello');
    const report = await lookupCudaToolkit({ PATH: `${join(d, 'broken')}:${join(d, 'liar')}` }, []);
    expect(report.toolkit).toBeUndefined();
    expect(report.tried).toEqual([join(d, 'broken', 'nvcc'), join(d, 'liar', 'nvcc')]);
  });

  // the development and CI machines have CUDA 13 installed under /usr/local/cuda (no GPU)
  it.runIf(existsSync('/usr/local/cuda/bin/nvcc'))('finds the real toolkit of this host by search root', async () => {
    const tk = await findCudaToolkit({ PATH: '' });
    expect(tk?.nvccPath).toBe('/usr/local/cuda/bin/nvcc');
    expect(tk?.version).toMatch(/^\d+\.\d+/);
    // nvcc --dryrun names the real toolkit root even through symlinks and wrapper scripts
    expect(existsSync(join(tk?.root ?? '/nonexistent', 'bin', 'nvcc'))).toBe(true);
  });
});
