import { randomUUID } from 'node:crypto';
import { resolveTaskRequest, TaskRequestSchema } from '@llama-orch/contracts';
import { describe, expect, it } from 'vitest';
import { captureLogger, taskBody } from '../testing/test-helpers.js';
import type { AttemptOutcome } from '../upstream/dispatch-attempt.js';
import type { ClusterTasks, TaskOwner } from './cluster-tasks.js';
import { mayHaveMoved, settleUnlessMoved } from './task-handoff.js';
import { newTaskRecord, type Delivery, type TaskRecord } from './task-record.js';
import { TaskTable } from './task-table.js';

function running(delivery: Delivery): TaskRecord {
  const request = resolveTaskRequest(TaskRequestSchema.parse(taskBody()), { deadlineMs: 60_000, newId: randomUUID });
  const task = newTaskRecord({ request, log: captureLogger().logger, correlationId: 'c', now: 0, predictedStartMs: 0, phase: 'queued', delivery });
  task.stream.append({ event: 'started', data: { queue_position: 0, predicted_start_ms: 0 } });
  task.stream.append({ event: 'token', data: { t: 'a', i: 0 } });
  task.state = 'running';
  return task;
}

/** The cluster side as the hand-off sees it: who the store says owns the task, and what it forgot. */
function cluster(owner: () => Promise<Partial<TaskOwner> | undefined>): ClusterTasks & { forgotten: string[] } {
  const forgotten: string[] = [];
  return { replicaId: 'r1', ownerOf: owner, forget: (id: string) => forgotten.push(id), forgotten } as unknown as ClusterTasks & { forgotten: string[] };
}

const reset: AttemptOutcome = { kind: 'fail', code: 'WORKER_RESET', message: 'stream from node ended without an end or error event', retriable: true };

describe('handing a running task off to the replica that took it over', () => {
  it('only a /v2 stream whose attempt failed or would be placed again may have moved', () => {
    expect(mayHaveMoved(running('events'), reset)).toBe(true);
    expect(mayHaveMoved(running('events'), { kind: 'retry', code: 'WORKER_RESET', message: 'x', penalty: 'pool' })).toBe(true);
    expect(mayHaveMoved(running('events'), { kind: 'aborted' })).toBe(false);
    expect(mayHaveMoved(running('stream'), reset)).toBe(false);
    expect(mayHaveMoved(running('answer'), reset)).toBe(false);
  });

  it("another replica owns it: readers are sent there, it leaves this replica's table, nothing is settled or written", async () => {
    const task = running('events');
    const table = new TaskTable({ graceMs: 1000, maxEnded: 10 });
    table.add(task);
    const c = cluster(() => Promise.resolve({ replica: 'r2', fence: 3 }));
    let settled = 0;
    let moved = 0;
    await settleUnlessMoved(
      task,
      c,
      table,
      () => void (settled += 1),
      () => void (moved += 1),
    );
    expect([settled, moved]).toEqual([0, 1]);
    expect(task.state).toBe('ended');
    expect(task.stream.state).toBe('moved');
    expect(table.get(task.id)).toBeUndefined();
    expect(c.forgotten).toEqual([task.id]);
  });

  it("still this replica's, unknown to the store, or the store unreachable: the attempt's outcome applies", async () => {
    for (const owner of [() => Promise.resolve({ replica: 'r1', fence: 2 }), () => Promise.resolve(undefined), () => Promise.reject(new Error('store down'))]) {
      const task = running('events');
      const table = new TaskTable({ graceMs: 1000, maxEnded: 10 });
      table.add(task);
      let settled = 0;
      await settleUnlessMoved(
        task,
        cluster(owner),
        table,
        () => void (settled += 1),
        () => expect.fail('handed off'),
      );
      expect(settled).toBe(1);
      expect(task.stream.state).toBe('open');
      expect(table.get(task.id)).toBe(task);
    }
  });

  it('a task that ended while the store was asked (a cancel) is left alone', async () => {
    const task = running('events');
    const table = new TaskTable({ graceMs: 1000, maxEnded: 10 });
    const c = cluster(() => {
      task.state = 'ended';
      return Promise.resolve({ replica: 'r2', fence: 3 });
    });
    await settleUnlessMoved(
      task,
      c,
      table,
      () => expect.fail('settled'),
      () => expect.fail('handed off'),
    );
    expect(task.stream.state).toBe('open');
  });
});
