import type { DashboardTask } from '@llama-orch/contracts';
import type { EndedTask } from '../tasks/task-events.js';

/** The dashboard's row for an ended task. */
export function toDashboardTask(t: EndedTask): DashboardTask {
  const row: DashboardTask = {
    task_id: t.taskId,
    correlation_id: t.correlationId,
    model: t.model,
    priority: t.priority,
    tokens_out: t.tokensOut,
    duration_ms: Math.max(0, t.endedAt - t.admittedAt),
    outcome: t.outcome,
    ended_at_ms: Math.max(0, Math.round(t.endedAt)),
  };
  if (t.nodeId !== undefined) row.node_id = t.nodeId;
  if (t.poolId !== undefined) row.pool_id = t.poolId;
  if (t.ttftMs !== undefined) row.ttft_ms = t.ttftMs;
  if (t.code !== undefined) row.code = t.code;
  return row;
}

/** Mean tokens of the listed tasks that produced any (the predictor's expected length of a new task); undefined when none did. */
export function meanTokens(rows: readonly DashboardTask[]): number | undefined {
  let sum = 0;
  let n = 0;
  for (const row of rows) {
    if (row.tokens_out === 0) continue;
    sum += row.tokens_out;
    n += 1;
  }
  return n === 0 ? undefined : sum / n;
}
