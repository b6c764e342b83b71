import { randomUUID } from 'node:crypto';
import { resolveTaskRequest, TaskRequestSchema, type EndEvent } from '@llama-orch/contracts';
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { Predictor, type PredictorPool } from '../admission/predictor.js';
import { createMetrics } from '../support/metrics.js';
import { captureLogger, taskBody } from '../testing/test-helpers.js';
import { TaskEvents } from './task-events.js';
import { TaskObserver } from './task-observer.js';
import { newTaskRecord, type TaskRecord } from './task-record.js';

const POOL: PredictorPool = {
  node_id: 'n1',
  pool_id: 'p',
  slots_total: 1,
  free: 0,
  decode_tps: 0,
  serving: true,
  provisioningEtaMs: undefined,
};

function observer(): { observer: TaskObserver; predictor: Predictor } {
  const predictor = new Predictor();
  const metrics = createMetrics(new Registry(), {
    queueDepth: () => ({ interactive: 0, batch: 0 }),
    nodesOnline: () => 0,
    pools: () => [],
    clusterLeader: () => true,
  });
  return { observer: new TaskObserver(metrics, predictor, new TaskEvents()), predictor };
}

/** A task dispatched to n1/p at `dispatchedAt`. */
function dispatched(dispatchedAt: number): TaskRecord {
  const request = resolveTaskRequest(TaskRequestSchema.parse(taskBody()), { deadlineMs: 60_000, newId: randomUUID });
  const task = newTaskRecord({
    request,
    log: captureLogger().logger,
    correlationId: 'c',
    now: 0,
    predictedStartMs: 0,
    phase: 'queued',
  });
  task.placement = { node_id: 'n1', pool_id: 'p', engine_version: 'v', address: 'http://127.0.0.1:9' };
  task.dispatchedAt = dispatchedAt;
  return task;
}

const end = (over: Partial<EndEvent> = {}): { event: 'end'; data: EndEvent } => ({
  event: 'end',
  data: {
    tokens_out: 4,
    decode_ms: 100,
    decode_time_ms: 100,
    pool_id: 'p',
    node_id: 'n1',
    engine_version: 'v',
    stop_type: 'limit',
    ...over,
  },
});

describe('TaskObserver → predictor', () => {
  it("feeds each normally ended task's slot time (dispatch → end) to the predictor's throughput", () => {
    const { observer: o, predictor } = observer();
    expect(predictor.predict({ maxTokens: 4, ahead: 0, pools: [POOL] }).throughputTps).toBeUndefined();
    o.ended(dispatched(1000), end(), 1250);
    o.ended(dispatched(2000), end(), 2250);
    // One slot released every 250 ms: 4 tasks/s.
    expect(predictor.predict({ maxTokens: 4, ahead: 0, pools: [POOL] })).toMatchObject({
      throughputTps: 4,
      startMs: 250,
      measured: true,
    });
  });

  it('learns nothing about slot time from a canceled task, an error, or a task never dispatched', () => {
    const { observer: o, predictor } = observer();
    o.ended(dispatched(0), end({ canceled: true }), 10);
    o.ended(dispatched(0), { event: 'error', data: { code: 'WORKER_RESET', message: 'x', retriable: true } }, 10);
    const never = dispatched(0);
    never.dispatchedAt = undefined;
    o.ended(never, end(), 10);
    expect(predictor.predict({ maxTokens: 4, ahead: 0, pools: [POOL] }).throughputTps).toBeUndefined();
  });
});
