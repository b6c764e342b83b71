import { ensureCpuTestEngine } from '@llama-orch/engine-provisioner';

/**
 * Builds (or finds cached) the real llama-server once, before any test file starts. A cold build
 * takes minutes; done here it has the cores to itself, and no suite's hook waits on the build lock
 * while other suites compete with it for CPU.
 */
export default async function setup(): Promise<void> {
  const started = Date.now();
  process.stderr.write('global setup: ensuring the llama-server test engine (a cold build takes ~5 min on 2 cores)\n');
  const engine = await ensureCpuTestEngine();
  process.stderr.write(
    `global setup: llama-server ${engine.engine_version} ${engine.cached ? 'from cache' : 'built'} in ${Math.round((Date.now() - started) / 1000)} s\n`,
  );
}
