import type { NodeMemory } from '@llama-orch/contracts';

/** What a node's pools take together: the sum of their `memory_bytes` (a pool without one takes nothing known). */
export function usedBytes(pools: ReadonlyArray<{ memory_bytes?: number | undefined }>): number {
  let sum = 0;
  for (const p of pools) sum += p.memory_bytes ?? 0;
  return sum;
}

/**
 * The `memory` of a registration or heartbeat: the on-demand budget and what the pools in the
 * same message take, so the two figures always agree with the pools orchestratord sees.
 */
export function nodeMemory(
  budgetBytes: number,
  pools: ReadonlyArray<{ memory_bytes?: number | undefined }>,
): NodeMemory {
  return { budget_bytes: budgetBytes, used_bytes: usedBytes(pools) };
}
