import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { PoolConfigSchema } from '@llama-orch/contracts';
import { EngineProvisioner } from './provisioner.js';
import { ensureCpuTestEngine, testCacheDir } from './testing.js';

describe('prepare with a known binary', () => {
  // A pool whose source cannot be resolved: any ensureBinary() on it fails.
  const pool = PoolConfigSchema.parse({
    id: 'known',
    model: '/m.gguf',
    source: { kind: 'bundle', bundle_path: '/nonexistent/llama.bundle' },
  });
  const prov = new EngineProvisioner({ cacheDir: testCacheDir(), logger: pino({ level: 'silent' }), env: process.env });

  it('reuses the binary without resolving the source again (restarts stay cheap)', async () => {
    const binary = await ensureCpuTestEngine(pino({ level: 'silent' }));
    const prepared = await prov.prepare(pool, { modelPath: '/m.gguf', replicaId: 'r0', binary });
    expect(prepared.binary_path).toBe(binary.binary_path);
    expect(prepared.engine_fingerprint).toBe(binary.engine_fingerprint);
  });

  it('ensures afresh when the known binary file is gone', async () => {
    const binary = await ensureCpuTestEngine(pino({ level: 'silent' }));
    const gone = { ...binary, binary_path: '/nonexistent/llama-server' };
    await expect(prov.prepare(pool, { modelPath: '/m.gguf', replicaId: 'r0', binary: gone })).rejects.toMatchObject({
      code: 'SOURCE_NOT_FOUND',
    });
  });
});
