import { describe, expect, it } from 'vitest';
import { DashboardTaskSchema } from '@llama-orch/contracts';
import type { EndedTask } from '../tasks/task-events.js';
import { meanTokens, toDashboardTask } from './recent-tasks.js';

function ended(i: number, over: Partial<EndedTask> = {}): EndedTask {
  return {
    taskId: `t${i}`,
    correlationId: `c${i}`,
    model: 'synthetic',
    priority: 'interactive',
    nodeId: 'n1',
    poolId: 'p',
    tokensOut: i,
    ttftMs: 12.5,
    admittedAt: 1000,
    endedAt: 1500 + i,
    outcome: 'ok',
    code: undefined,
    ...over,
  };
}

describe('recent tasks', () => {
  it('mean tokens of the rows that produced any', () => {
    expect(meanTokens([])).toBeUndefined();
    expect(meanTokens([3, 4, 5].map((i) => toDashboardTask(ended(i))))).toBe(4);
    expect(meanTokens([0, 6].map((i) => toDashboardTask(ended(i))))).toBe(6);
  });

  it('rows validate against the contract; absent facts stay absent', () => {
    const ok = toDashboardTask(ended(7));
    expect(DashboardTaskSchema.parse(ok)).toEqual({
      task_id: 't7',
      correlation_id: 'c7',
      model: 'synthetic',
      priority: 'interactive',
      node_id: 'n1',
      pool_id: 'p',
      tokens_out: 7,
      ttft_ms: 12.5,
      duration_ms: 507,
      outcome: 'ok',
      ended_at_ms: 1507,
    });
    const failed = toDashboardTask(
      ended(0, { nodeId: undefined, poolId: undefined, ttftMs: undefined, outcome: 'error', code: 'DEADLINE_UNMET' }),
    );
    expect(DashboardTaskSchema.parse(failed)).toEqual({
      task_id: 't0',
      correlation_id: 'c0',
      model: 'synthetic',
      priority: 'interactive',
      tokens_out: 0,
      duration_ms: 500,
      outcome: 'error',
      code: 'DEADLINE_UNMET',
      ended_at_ms: 1500,
    });
    expect(meanTokens([failed])).toBeUndefined();
  });
});
