import { describe, expect, it } from 'vitest';
import {
  DispatchEventSchema, DispatchRequestSchema, HandoffFileSchema, HeartbeatRequestSchema, NodeRegisterRequestSchema, PoolSnapshotSchema,
  PoolStatusSchema, PreparedEngineSchema, ResolvedModelSchema,
} from './index.js';

const pool = {
  pool_id: 'cpu0', state: 'ready', ready: true, draining: false, slots_total: 2, slots_free: 1, models: ['synthetic:llama'],
  engine_version: 'b1-de3ff81', ctx: 1024, deterministic: false, decode_tps: 2000,
};

describe('node API', () => {
  it('accepts a registration and a heartbeat', () => {
    expect(NodeRegisterRequestSchema.safeParse({
      node_id: 'node-a', machine_id: 'host-1', address: 'http://127.0.0.1:9200', pools: [pool],
      capabilities: { gpus: [{ device_id: 0, name: 'NVIDIA H100', vram_total_bytes: 85_000_000_000, compute_capability: '9.0' }], cpu_cores: 16, ram_total_bytes: 1 << 30 },
      version: '0.1.0',
    }).success).toBe(true);
    expect(HeartbeatRequestSchema.safeParse({ timestamp: new Date().toISOString(), pools: [pool] }).success).toBe(true);
  });

  it.each([
    ['negative slots', { ...pool, slots_free: -1 }],
    ['unknown state', { ...pool, state: 'warming' }],
    ['unknown key', { ...pool, gpu_temp: 80 }],
    ['missing models', { ...pool, models: undefined }],
  ])('rejects a pool snapshot with %s', (_n, snap) => {
    expect(PoolSnapshotSchema.safeParse(snap).success).toBe(false);
  });

  it('rejects a registration with a non-http address or bad node id', () => {
    const base = { node_id: 'n', machine_id: 'm', address: 'http://127.0.0.1:1', pools: [], capabilities: { gpus: [], cpu_cores: 2, ram_total_bytes: 1 }, version: 'x' };
    expect(NodeRegisterRequestSchema.safeParse(base).success).toBe(true);
    expect(NodeRegisterRequestSchema.safeParse({ ...base, address: 'file:///etc/passwd' }).success).toBe(false);
    expect(NodeRegisterRequestSchema.safeParse({ ...base, node_id: '../x' }).success).toBe(false);
    expect(NodeRegisterRequestSchema.safeParse({ ...base, capabilities: { gpus: [], cpu_cores: 0, ram_total_bytes: 1 } }).success).toBe(false);
  });
});

describe('handoff file', () => {
  const handoff = {
    pool_id: 'cpu0', replica_id: 'r0', engine: 'llamacpp', engine_version: 'b1-de3ff81', url: 'http://127.0.0.1:41234', pid: 1234,
    model: { id: 'synthetic:llama', path: '/cache/models/x.gguf' }, slots_total: 1, flags: ['-m', 'x'], provisioning_mode: 'managed',
    written_at: new Date().toISOString(),
  };
  it('accepts a valid file and rejects partial or hostile ones', () => {
    expect(HandoffFileSchema.safeParse(handoff).success).toBe(true);
    expect(HandoffFileSchema.safeParse({ ...handoff, pid: 0 }).success).toBe(false);
    expect(HandoffFileSchema.safeParse({ ...handoff, url: 'ftp://x' }).success).toBe(false);
    expect(HandoffFileSchema.safeParse({ ...handoff, pool_id: '../../etc' }).success).toBe(false);
    const { model: _m, ...partial } = handoff;
    expect(HandoffFileSchema.safeParse(partial).success).toBe(false);
  });
});

describe('pool-managerd bodies', () => {
  it('dispatch request defaults greedy to false and rejects bad values', () => {
    const ok = DispatchRequestSchema.parse({ task_id: '0b7e3f9c-3c1a-4f7e-9c55-1f5b2b8d2a10', prompt: 'x', max_tokens: 4 });
    expect(ok.greedy).toBe(false);
    expect(DispatchRequestSchema.safeParse({ task_id: 'x', prompt: 'x', max_tokens: 4 }).success).toBe(false);
    expect(DispatchRequestSchema.safeParse({ task_id: ok.task_id, prompt: 'x', max_tokens: 0 }).success).toBe(false);
  });

  it('dispatch events are a closed union', () => {
    expect(DispatchEventSchema.safeParse({ type: 'token', t: 'a', i: 0 }).success).toBe(true);
    expect(DispatchEventSchema.safeParse({ type: 'end', tokens_out: 1, decode_ms: 1, stop_type: 'limit', engine_version: 'v', pool_id: 'p', node_id: 'n' }).success).toBe(true);
    expect(DispatchEventSchema.safeParse({ type: 'error', code: 'WORKER_RESET', message: 'x', retriable: true }).success).toBe(true);
    expect(DispatchEventSchema.safeParse({ type: 'progress', pct: 1 }).success).toBe(false);
  });

  it('pool status rejects negative leases', () => {
    const status = { ...pool, live: true, active_leases: 1, restarts: 0, breaker: 'closed', updated_at: new Date().toISOString() };
    expect(PoolStatusSchema.safeParse(status).success).toBe(true);
    expect(PoolStatusSchema.safeParse({ ...status, active_leases: -1 }).success).toBe(false);
  });
});

describe('engine and model results', () => {
  it('PreparedEngine requires a valid port and the pool id grammar', () => {
    const engine = {
      binary_path: '/c/llama-server', flags: ['-m', '/m.gguf'], host: '127.0.0.1', port: 8081, model_path: '/m.gguf', engine: 'llamacpp',
      engine_version: '0.5.0', engine_fingerprint: 'abc', pool_id: 'cpu0', replica_id: 'r0', gpu_policy: 'off',
      build_provenance: { source: 'bundle:v0.5.0', commit: 'de3ff81', cmake_flags: [], cuda: false, toolchain: { cmake: '3.25' }, build_ms: 1, version_output: 'v', built_at: new Date().toISOString() },
    };
    expect(PreparedEngineSchema.safeParse(engine).success).toBe(true);
    expect(PreparedEngineSchema.safeParse({ ...engine, port: 70000 }).success).toBe(false);
  });
  it('ResolvedModel requires a sha256 digest', () => {
    const model = { id: 'm', ref: 'synthetic:llama', local_path: '/m.gguf', size_bytes: 1, sha256: 'a'.repeat(64), source: 'synthetic',
      gguf: { architecture: 'llama', context_length: 256, file_type: 0, tensor_count: 20 } };
    expect(ResolvedModelSchema.safeParse(model).success).toBe(true);
    expect(ResolvedModelSchema.safeParse({ ...model, sha256: 'xyz' }).success).toBe(false);
  });
});
