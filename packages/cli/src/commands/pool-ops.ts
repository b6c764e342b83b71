import { PoolOperationResponseSchema } from '@llama-orch/contracts';
import { callJson, callNoContent, type Target } from '../http.js';

/** `llorch cancel <task>`: POST /v2/tasks/{id}/cancel (204; 404 for an unknown task). */
export async function cancelTask(target: Target, taskId: string): Promise<string> {
  await callNoContent(target, 'POST', `/v2/tasks/${encodeURIComponent(taskId)}/cancel`);
  return `cancel requested for task ${taskId}`;
}

/** `llorch drain <pool>`: POST /v2/pools/{id}/drain; the node answers 202 with the pool's state. */
export async function drainPool(target: Target, poolId: string, deadlineMs: number): Promise<string> {
  const res = await callJson(
    target,
    'POST',
    `/v2/pools/${encodeURIComponent(poolId)}/drain`,
    PoolOperationResponseSchema,
    { deadline_ms: deadlineMs },
  );
  return `drain of pool ${res.pool_id} accepted (state ${res.state}); \`llorch status\` shows its progress`;
}

/** `llorch reload <pool> <model>`: POST /v2/pools/{id}/reload; the old engine is restored on failure. */
export async function reloadPool(
  target: Target,
  poolId: string,
  modelRef: string,
  opts: { sha256?: string | undefined; deadlineMs: number },
): Promise<string> {
  const body = {
    new_model_ref: modelRef,
    deadline_ms: opts.deadlineMs,
    ...(opts.sha256 !== undefined ? { sha256: opts.sha256 } : {}),
  };
  const res = await callJson(
    target,
    'POST',
    `/v2/pools/${encodeURIComponent(poolId)}/reload`,
    PoolOperationResponseSchema,
    body,
  );
  return `reload of pool ${res.pool_id} to '${modelRef}' accepted (state ${res.state}); \`llorch status\` shows its progress`;
}
