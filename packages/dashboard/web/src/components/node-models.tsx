import type { DashboardSnapshot } from '@llama-orch/contracts';
import { formatBytes } from '../lib/format.js';
import { nodeModels } from '../lib/memory.js';

/** The models a node has loaded (its pools): loaded on demand or static, memory taken, idle or busy. */
export function NodeModels({ snapshot, nodeId }: { snapshot: DashboardSnapshot; nodeId: string }) {
  const models = nodeModels(snapshot, nodeId);
  if (models.length === 0) return <span class="muted">none</span>;
  return (
    <ul class="node-models">
      {models.map((m) => (
        <li key={m.poolId} data-model-pool={m.poolId} data-origin={m.origin}>
          <code title={`pool ${m.poolId}`}>{m.model}</code>
          {m.aliases.length > 0 ? <span class="muted"> ({m.aliases.join(', ')})</span> : null}{' '}
          <span class={`badge origin-${m.origin}`}>{m.origin === 'catalog' ? 'on demand' : 'static'}</span>
          <span class="muted">
            {m.memoryBytes !== undefined ? ` ${formatBytes(m.memoryBytes)} · ` : ' '}
            {m.idleSince !== undefined ? (
              <time dateTime={m.idleSince} data-activity="idle">
                {m.activity}
              </time>
            ) : (
              <span data-activity={m.activity}>{m.activity}</span>
            )}
          </span>
        </li>
      ))}
    </ul>
  );
}
