import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { PoolConfig, PreparedEngine } from '@llama-orch/contracts';
import { findFreePort, type EngineBinary } from '@llama-orch/engine-provisioner';
import { dispatch, poolStatus, startHarness, until, type Harness } from '../testing/harness.js';

// Fault injection: the pool's "engine" is a fixture that exits 1 at once. Only the binary is faked
// (the engine provisioner's answer); process supervision, the pool table and HTTP are the real ones.
const CRASHING = fileURLToPath(new URL('../fixtures/crashing-engine.mjs', import.meta.url));
const provenance = {
  source: 'fixture',
  cmake_flags: [],
  cuda: false,
  toolchain: {},
  build_ms: 0,
  version_output: 'fixture',
  built_at: new Date().toISOString(),
};
const engines = {
  ensureBinary: async (): Promise<EngineBinary> => ({
    binary_path: CRASHING,
    engine_version: 'fixture',
    engine_fingerprint: 'fixture',
    build_provenance: provenance,
    cached: true,
  }),
  prepare: async (pool: PoolConfig, o: { modelPath: string; replicaId: string }): Promise<PreparedEngine> => ({
    binary_path: CRASHING,
    flags: ['-m', o.modelPath],
    host: '127.0.0.1',
    port: await findFreePort(),
    model_path: o.modelPath,
    engine: 'llamacpp',
    engine_version: 'fixture',
    engine_fingerprint: 'fixture',
    build_provenance: provenance,
    pool_id: pool.id,
    replica_id: o.replicaId,
    gpu_policy: 'off',
  }),
};

let h: Harness;
beforeAll(async () => {
  h = await startHarness({
    realEngine: false,
    engines,
    pools: [{ id: 'crashy', model: 'synthetic:llama' }],
    supervision: { backoffBaseMs: 20, backoffMaxMs: 200, breakerThreshold: 5, breakerCooldownMs: 60_000 },
  });
}, 10 * 60_000);
afterAll(async () => {
  await h?.close();
});

describe('circuit breaker on a pool whose engine always crashes', () => {
  it('opens after 5 consecutive failures: pool failed with last_error, breaker open, never dispatchable', async () => {
    const s = await until(
      async () => {
        const st = await poolStatus(h, 'crashy');
        return st.state === 'failed' ? st : undefined;
      },
      'pool failed',
      60_000,
      20,
    );
    expect(s).toMatchObject({ ready: false, breaker: 'open', restarts: 4 });
    expect(s.last_error).toMatch(/circuit open after 5 consecutive failures/);
    expect(s.last_error).toMatch(/exited during load \(code 1/);
    expect(s.reason).toMatch(/next trial at/);
    const d = await dispatch(h, 'crashy', { prompt: 'x', max_tokens: 1 });
    expect(d.status).toBe(503);
    // Open means no more starts until the cool-down.
    await new Promise((r) => setTimeout(r, 300));
    expect((await poolStatus(h, 'crashy')).restarts).toBe(4);
  });
});
