import { describe, expect, it } from 'vitest';
import { AdmissionResponseSchema, PlacementOverridesSchema, TaskRequestSchema, type TaskRequestInput } from './index.js';

const valid: TaskRequestInput = {
  task_id: '0b7e3f9c-3c1a-4f7e-9c55-1f5b2b8d2a10',
  session_id: '5d0c2b5e-8a0b-4b8e-a7a4-0d5e9b3f6c21',
  workload: 'completion',
  model_ref: 'synthetic:llama',
  engine: 'llamacpp',
  ctx: 256,
  priority: 'interactive',
  seed: 42,
  prompt: 'Write a haiku',
  max_tokens: 16,
  deadline_ms: 30_000,
};

function issuesOf(input: unknown): string[] {
  const r = TaskRequestSchema.safeParse(input);
  return r.success ? [] : r.error.issues.map((i) => `${i.path.join('.')}:${i.code}`);
}

describe('TaskRequest', () => {
  it('accepts a complete request and fills placement defaults', () => {
    const parsed = TaskRequestSchema.parse({ ...valid, placement: { mode: 'prefer', prefer_pools: ['gpu0'] } });
    expect(parsed.placement?.allow_fallback).toBe(true);
  });

  it.each([
    ['missing prompt (completion)', { ...valid, prompt: undefined }, 'prompt:custom'],
    ['wrong enum', { ...valid, priority: 'urgent' }, 'priority:invalid_value'],
    ['unsupported workload', { ...valid, workload: 'embedding' }, 'workload:invalid_value'],
    ['unknown key', { ...valid, temperature: 0.7 }, ':unrecognized_keys'],
    ['ctx below range', { ...valid, ctx: -1 }, 'ctx:too_small'],
    ['max_tokens zero', { ...valid, max_tokens: 0 }, 'max_tokens:too_small'],
    ['max_tokens above cap', { ...valid, max_tokens: 1_000_000 }, 'max_tokens:too_big'],
    ['deadline zero', { ...valid, deadline_ms: 0 }, 'deadline_ms:too_small'],
    ['non-integer ctx', { ...valid, ctx: 1.5 }, 'ctx:invalid_type'],
    ['bad uuid', { ...valid, task_id: 'abc' }, 'task_id:invalid_format'],
    ['wrong type', { ...valid, max_tokens: '16' }, 'max_tokens:invalid_type'],
    ['pin without pool', { ...valid, placement: { mode: 'pin' } }, 'placement.pin_pool_id:custom'],
    ['unknown placement key', { ...valid, placement: { mode: 'auto', zone: 'eu' } }, 'placement:unrecognized_keys'],
  ])('rejects %s', (_name, input, expected) => {
    expect(issuesOf(input)).toContain(expected);
  });

  it('names the offending field in the issue path', () => {
    const r = TaskRequestSchema.safeParse({ ...valid, max_tokens: -5 });
    expect(r.success).toBe(false);
    expect(r.error?.issues[0]?.path).toEqual(['max_tokens']);
  });

  it('placement overrides validate pool ids', () => {
    expect(PlacementOverridesSchema.safeParse({ mode: 'pin', pin_pool_id: '../etc' }).success).toBe(false);
    expect(PlacementOverridesSchema.safeParse({ mode: 'pin', pin_pool_id: 'gpu-0' }).success).toBe(true);
  });
});

describe('AdmissionResponse', () => {
  const ok = {
    task_id: valid.task_id, queue_position: 0, predicted_start_ms: 12, backoff_ms: 0,
    streams: { sse: 'http://127.0.0.1:8080/v2/tasks/x/events', sse_verbose: 'http://127.0.0.1:8080/v2/tasks/x/events?verbose=true' },
    preparation: { steps: [] },
  };
  it('requires absolute stream URLs', () => {
    expect(AdmissionResponseSchema.safeParse(ok).success).toBe(true);
    expect(AdmissionResponseSchema.safeParse({ ...ok, streams: { sse: '/v2/tasks/x/events', sse_verbose: ok.streams.sse_verbose } }).success).toBe(false);
  });
  it('rejects negative positions and unknown step kinds', () => {
    expect(AdmissionResponseSchema.safeParse({ ...ok, queue_position: -1 }).success).toBe(false);
    expect(AdmissionResponseSchema.safeParse({ ...ok, preparation: { steps: [{ id: 'a', kind: 'compile', description: 'x', status: 'pending' }] } }).success).toBe(false);
    expect(AdmissionResponseSchema.safeParse({ ...ok, preparation: { steps: [{ id: 'a', kind: 'model_fetch', description: 'x', status: 'running', bytes_total: 10, bytes_done: 3 }] } }).success).toBe(true);
  });
});
