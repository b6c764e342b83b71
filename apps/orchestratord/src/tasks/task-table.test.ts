import { describe, expect, it } from 'vitest';
import { captureLogger } from '../testing/test-helpers.js';
import { newTaskRecord, type TaskRecord } from './task-record.js';
import { TaskTable } from './task-table.js';

function task(id: string, now = 0): TaskRecord {
  return newTaskRecord({
    request: {
      task_id: id,
      session_id: 's',
      workload: 'completion',
      model_ref: 'm',
      engine: 'llamacpp',
      ctx: 0,
      priority: 'interactive',
      prompt: 'p',
      max_tokens: 1,
      deadline_ms: 1000,
    },
    log: captureLogger().logger,
    correlationId: 'c',
    now,
    predictedStartMs: 0,
    phase: 'queued',
  });
}

describe('TaskTable', () => {
  it("keeps an ended task's frames for the grace period only, then forgets it", () => {
    const table = new TaskTable({ graceMs: 100, maxEnded: 10 });
    const a = task('a');
    table.add(a);
    table.startedRunning(a);
    expect(table.get('a')).toBe(a);
    table.retire(a, 1000);
    expect(table.live('a')).toBeUndefined();
    expect(table.running().size).toBe(0);
    expect(table.get('a')).toEqual({ id: 'a', stream: a.stream, state: 'ended', clientKey: a.clientKey });
    expect(table.has('a')).toBe(true);
    table.expire(1099);
    expect(table.isEndedWithinGrace('a')).toBe(true);
    table.expire(1100);
    expect(table.get('a')).toBeUndefined();
  });

  it('past maxEnded the oldest ended tasks go at once', () => {
    const table = new TaskTable({ graceMs: 60_000, maxEnded: 2 });
    for (const [i, id] of ['a', 'b', 'c'].entries()) {
      const t = task(id);
      table.add(t);
      table.retire(t, i);
    }
    expect(['a', 'b', 'c'].map((id) => table.has(id))).toEqual([false, true, true]);
  });
});
