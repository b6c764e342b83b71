import { randomUUID } from 'node:crypto';
import { resolveTaskRequest, TaskInfoSchema, TaskRequestSchema } from '@llama-orch/contracts';
import { describe, expect, it } from 'vitest';
import { createLocalStore } from '../store/memory/memory-store.js';
import { captureLogger, taskBody } from '../testing/test-helpers.js';
import { endedInfo, TaskJournal, taskInfo } from './task-journal.js';
import { newTaskRecord, type TaskRecord } from './task-record.js';

function task(over = {}): TaskRecord {
  const request = resolveTaskRequest(TaskRequestSchema.parse(taskBody(over)), {
    deadlineMs: 60_000,
    newId: randomUUID,
  });
  return newTaskRecord({
    request,
    modelName: 'alias',
    log: captureLogger().logger,
    correlationId: 'corr-1',
    clientKey: 'cat',
    now: 1000,
    predictedStartMs: 250.4,
    phase: 'queued',
    door: 'responses',
  });
}

describe('task records as the journal writes them', () => {
  it('a queued task: its position and prediction, no placement', () => {
    const t = task({ priority: 'batch' });
    t.lastPosition = 3;
    const info = TaskInfoSchema.parse(taskInfo(t));
    expect(info).toMatchObject({
      state: 'queued',
      model: 'alias',
      model_ref: 'm',
      priority: 'batch',
      door: 'responses',
      correlation_id: 'corr-1',
      admitted_at: 1000,
      queue_position: 3,
      predicted_start_ms: 250,
      attempts: 0,
      usage: { tokens_out: 0 },
      timings: {},
    });
  });

  it('a running task: pool, attempts, first token; ended: outcome, the engine figures, timings from admission', () => {
    const t = task();
    t.life.run();
    t.placement = { node_id: 'n1', pool_id: 'p', engine_version: 'v', address: 'http://x' };
    t.dispatchedAt = 1100;
    t.firstTokenAt = 1300;
    t.tokens = 5;
    t.failedAttempts = 1;
    expect(TaskInfoSchema.parse(taskInfo(t))).toMatchObject({
      state: 'running',
      pool_id: 'p',
      node_id: 'n1',
      attempts: 2,
      usage: { tokens_out: 5 },
      timings: { dispatched_at: 1100, queued_ms: 100, first_token_at: 1300, first_token_ms: 300 },
    });
    const done = endedInfo(
      t,
      {
        event: 'end',
        data: {
          tokens_out: 7,
          prompt_tokens: 40,
          cached_tokens: 32,
          decode_ms: 10,
          decode_time_ms: 10,
          stop_type: 'eos',
          finish_reason: 'stop',
        },
      },
      2000,
    );
    expect(TaskInfoSchema.parse(done)).toMatchObject({
      state: 'ended',
      outcome: { result: 'completed', stop_type: 'eos', finish_reason: 'stop' },
      usage: { tokens_out: 7, tokens_in: 40, cached_tokens: 32 },
      timings: { ended_at: 2000, total_ms: 1000, first_token_ms: 300 },
    });
    expect(done.queue_position).toBeUndefined();
  });

  it('a canceled and a failed task say so', () => {
    const canceled = endedInfo(
      task(),
      { event: 'end', data: { tokens_out: 0, decode_ms: 0, decode_time_ms: 0, stop_type: 'cancel', canceled: true } },
      1500,
    );
    expect(canceled.outcome).toEqual({ result: 'canceled', stop_type: 'cancel' });
    const failed = endedInfo(
      task(),
      { event: 'error', data: { code: 'WORKER_RESET', message: 'engine died', retriable: true, engine: 'llamacpp' } },
      1500,
    );
    expect(failed.outcome).toEqual({ result: 'error', error: { code: 'WORKER_RESET', message: 'engine died' } });
  });

  it('writes the entry its readers filter on, kept for the deadline plus the retention while live, the retention once ended', async () => {
    let now = 1000;
    const store = createLocalStore({ clock: { now: () => now } });
    const journal = new TaskJournal({
      store: store.taskRecords,
      owner: 'r1',
      retainMs: 500,
      log: captureLogger().logger,
    });
    const t = task({ deadline_ms: 10_000 });
    journal.changed(t);
    const entry = await store.taskRecords.get(t.id);
    expect(entry).toMatchObject({ state: 'queued', model: 'alias', modelRef: 'm', clientKey: 'cat', owner: 'r1' });
    now += 10_400; // inside the deadline plus the retention
    expect(await store.taskRecords.get(t.id)).toBeDefined();
    journal.ended(t, { event: 'error', data: { code: 'INTERNAL', message: 'x', retriable: false } }, now);
    now += 499;
    expect((await store.taskRecords.get(t.id))?.state).toBe('ended');
    now += 2;
    expect(await store.taskRecords.get(t.id)).toBeUndefined();
  });
});
