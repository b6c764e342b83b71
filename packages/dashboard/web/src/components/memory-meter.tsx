import { memoryUse, type NodeMemory } from '../lib/memory.js';

/**
 * A node's on-demand memory: a bar (`role="meter"`, bytes as its values, the figures as its
 * value text) with the same figures written beside it, so neither colour nor the bar's length
 * carries anything alone.
 */
export function MemoryMeter({ nodeId, memory }: { nodeId: string; memory: NodeMemory }) {
  const use = memoryUse(memory);
  return (
    <div class="memory" data-used-bytes={use.usedBytes} data-budget-bytes={use.budgetBytes}>
      <div
        class="meter"
        role="meter"
        aria-label={`On-demand memory of ${nodeId}`}
        aria-valuemin={0}
        aria-valuemax={use.budgetBytes}
        aria-valuenow={Math.min(use.usedBytes, use.budgetBytes)}
        aria-valuetext={use.text}
        data-over={use.percent > 100 ? 'true' : undefined}
      >
        <div class="meter-fill" style={{ width: `${(use.fraction * 100).toFixed(1)}%` }} />
      </div>
      <span class="memory-text">{use.text}</span>
    </div>
  );
}
