import { randomUUID } from 'node:crypto';
import { resolveTaskRequest, TaskRequestSchema } from '@llama-orch/contracts';
import { afterEach, describe, expect, it } from 'vitest';
import { NodeRegistry } from '../registry/node-registry.js';
import { captureLogger, ManualClock, snapshot, taskBody } from '../testing/test-helpers.js';
import { maxAheadForDeadline } from './admission-checks.js';
import { predictTask } from './prediction.js';
import { missesDeadline, Predictor } from './predictor.js';

describe('maxAheadForDeadline (the deadline check as a count a shared store can apply)', () => {
  const registries: NodeRegistry[] = [];
  afterEach(async () => {
    await Promise.all(registries.splice(0).map((r) => r.close()));
  });

  const poolsOf = (pools: ReturnType<typeof snapshot>[]) => {
    const clock = new ManualClock();
    const r = new NodeRegistry({ heartbeatIntervalMs: 60_000, clock, logger: captureLogger().logger });
    registries.push(r);
    r.register({
      node_id: 'n1',
      machine_id: 'n1',
      address: 'http://127.0.0.1:9',
      pools,
      capabilities: { gpus: [], cpu_cores: 1, ram_total_bytes: 1 },
      version: 'x',
    });
    r.heartbeat('n1', { timestamp: new Date(clock.now()).toISOString(), pools });
    return r.poolsForModel('m');
  };

  it('is the last count of tasks ahead that passes the deadline check, as counting one by one finds it', () => {
    const predictor = new Predictor();
    const shapes = [
      poolsOf([snapshot({ pool_id: 'busy', models: ['m'], slots_total: 1, slots_free: 0, decode_tps: 10 })]),
      poolsOf([
        snapshot({ pool_id: 'a', models: ['m'], slots_total: 4, slots_free: 2, decode_tps: 50 }),
        snapshot({ pool_id: 'b', models: ['m'], slots_total: 1, slots_free: 0, decode_tps: 5 }),
      ]),
    ];
    let checked = 0;
    for (const listed of shapes) {
      for (const deadline of [500, 5000, 16_000, 61_000, 400_000]) {
        // expected_tokens makes the prediction `measured`: the only kind the check refuses on.
        const request = resolveTaskRequest(
          TaskRequestSchema.parse(
            taskBody({ model_ref: 'm', max_tokens: 100, expected_tokens: 100, deadline_ms: deadline }),
          ),
          {
            deadlineMs: 60_000,
            newId: randomUUID,
          },
        );
        const misses = (ahead: number) => missesDeadline(predictTask(predictor, request, ahead, listed), deadline);
        let counted = -1;
        while (counted < 5000 && !misses(counted + 1)) counted += 1;
        for (const hint of [0, 3, 64, 10_000])
          expect(maxAheadForDeadline(predictor, request, listed, hint)).toBe(counted);
        checked += counted;
      }
    }
    expect(checked).toBeGreaterThan(0);
  });

  it('is -1 when even first in line misses, and undefined when no count is refused (an unmeasured prediction)', () => {
    const predictor = new Predictor();
    const listed = poolsOf([
      snapshot({ pool_id: 'busy', models: ['m'], slots_total: 1, slots_free: 0, decode_tps: 10 }),
    ]);
    const body = (o: object) =>
      resolveTaskRequest(TaskRequestSchema.parse(taskBody({ model_ref: 'm', max_tokens: 100, ...o })), {
        deadlineMs: 60_000,
        newId: randomUUID,
      });
    expect(maxAheadForDeadline(predictor, body({ expected_tokens: 100, deadline_ms: 100 }), listed, 64)).toBe(-1);
    // No task ended on the pool and no expected_tokens: a guess, never refused on.
    expect(maxAheadForDeadline(predictor, body({ deadline_ms: 100 }), listed, 64)).toBeUndefined();
  });
});
