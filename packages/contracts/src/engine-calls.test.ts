import { describe, expect, it } from 'vitest';
import { DispatchRequestSchema, PoolSnapshotSchema, servesCapability, taskCapability } from './index.js';

const facts = {
  pool_id: 'p0', state: 'ready', ready: true, draining: false, slots_total: 2, slots_free: 1,
  models: ['m'], engine_version: 'b1', ctx: 4096, deterministic: false, decode_tps: 10,
} as const;
const id = '6f1c2c1e-0d5a-4b8e-9a57-3f1c7e0b2a11';

describe('engine calls and pool capabilities', () => {
  it('a dispatch with an engine call needs no prompt or messages; its body is any record; kinds are closed', () => {
    expect(DispatchRequestSchema.safeParse({ task_id: id, max_tokens: 1, stream: false, call: { kind: 'embeddings', body: { input: ['a'] } } }).success).toBe(true);
    expect(DispatchRequestSchema.safeParse({ task_id: id, max_tokens: 1, call: { kind: 'infill', body: { input_prefix: 'a', input_suffix: 'b' } } }).success).toBe(true);
    expect(DispatchRequestSchema.safeParse({ task_id: id, max_tokens: 1, call: { kind: 'tokenize', body: {} } }).success).toBe(false);
    expect(DispatchRequestSchema.safeParse({ task_id: id, max_tokens: 1, call: { kind: 'rerank' } }).success).toBe(false);
    // Without a call the workload's input is still required.
    expect(DispatchRequestSchema.safeParse({ task_id: id, max_tokens: 1 }).success).toBe(false);
  });

  it('pool facts carry known capabilities; absent means chat and completion', () => {
    expect(PoolSnapshotSchema.safeParse({ ...facts, capabilities: ['embeddings'] }).success).toBe(true);
    expect(PoolSnapshotSchema.safeParse({ ...facts, capabilities: ['vision'] }).success).toBe(false);
    expect(servesCapability(undefined, 'chat')).toBe(true);
    expect(servesCapability(undefined, 'embeddings')).toBe(false);
    expect(servesCapability(['rerank'], 'rerank')).toBe(true);
    expect(taskCapability({ workload: 'chat' })).toBe('chat');
    expect(taskCapability({ workload: 'completion', call: { kind: 'infill', body: {} } })).toBe('infill');
  });
});
