import { randomUUID } from 'node:crypto';
import { resolveTaskRequest, TaskRequestSchema } from '@llama-orch/contracts';
import { describe, expect, it } from 'vitest';
import { captureLogger, taskBody } from '../../testing/test-helpers.js';
import type { AttemptOutcome } from '../../upstream/dispatch-attempt.js';
import type { ClusterTasks, TaskOwner } from './cluster-tasks.js';
import { mayHaveMoved, unlessMoved } from './handoff.js';
import { newTaskRecord, type Delivery, type TaskRecord } from '../task-record.js';

function running(delivery: Delivery): TaskRecord {
  const request = resolveTaskRequest(TaskRequestSchema.parse(taskBody()), { deadlineMs: 60_000, newId: randomUUID });
  const task = newTaskRecord({
    request,
    log: captureLogger().logger,
    correlationId: 'c',
    now: 0,
    predictedStartMs: 0,
    phase: 'queued',
    delivery,
  });
  task.stream.append({ event: 'started', data: { queue_position: 0, predicted_start_ms: 0 } });
  task.stream.append({ event: 'token', data: { t: 'a', i: 0 } });
  task.life.run();
  return task;
}

/** The cluster side as the hand-off sees it: who the store says owns the task. */
function cluster(owner: () => Promise<Partial<TaskOwner> | undefined>): Pick<ClusterTasks, 'ownerOf' | 'replicaId'> {
  return { replicaId: 'r1', ownerOf: owner as ClusterTasks['ownerOf'] };
}

const reset: AttemptOutcome = {
  kind: 'fail',
  code: 'WORKER_RESET',
  message: 'stream from node ended without an end or error event',
  retriable: true,
};

describe('handing a running task off to the replica that took it over', () => {
  it('only a /v2 stream whose attempt failed or would be placed again may have moved', () => {
    expect(mayHaveMoved(running('events'), reset)).toBe(true);
    expect(
      mayHaveMoved(running('events'), { kind: 'retry', code: 'WORKER_RESET', message: 'x', penalty: 'pool' }),
    ).toBe(true);
    expect(mayHaveMoved(running('events'), { kind: 'aborted' })).toBe(false);
    expect(mayHaveMoved(running('stream'), reset)).toBe(false);
    expect(mayHaveMoved(running('answer'), reset)).toBe(false);
  });

  it('another replica owns it: the task moves there (the task service hands it off), nothing is settled', async () => {
    const task = running('events');
    let settled = 0;
    const moved: string[] = [];
    await unlessMoved(
      task,
      cluster(() => Promise.resolve({ replica: 'r2', fence: 3 })),
      () => void (settled += 1),
      (to) => void moved.push(to),
    );
    expect([settled, moved]).toEqual([0, ['r2']]);
  });

  it("still this replica's, unknown to the store, or the store unreachable: the attempt's outcome applies", async () => {
    for (const owner of [
      () => Promise.resolve({ replica: 'r1', fence: 2 }),
      () => Promise.resolve(undefined),
      () => Promise.reject(new Error('store down')),
    ]) {
      const task = running('events');
      let settled = 0;
      await unlessMoved(
        task,
        cluster(owner),
        () => void (settled += 1),
        () => expect.fail('handed off'),
      );
      expect(settled).toBe(1);
    }
  });

  it('a task that ended while the store was asked (a cancel) is left alone', async () => {
    const task = running('events');
    const c = cluster(() => {
      task.life.end('frame');
      return Promise.resolve({ replica: 'r2', fence: 3 });
    });
    await unlessMoved(
      task,
      c,
      () => expect.fail('settled'),
      () => expect.fail('handed off'),
    );
    expect(task.stream.state).toBe('open');
  });
});
