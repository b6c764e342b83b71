import type { ClusterPool, DashboardSnapshot, NodeInfo } from '@llama-orch/contracts';
import { formatAgo, formatBytes } from './format.js';

export type NodeMemory = NonNullable<NodeInfo['memory']>;

/** A node's on-demand memory as its bar shows it. */
export interface MemoryUse {
  readonly usedBytes: number;
  readonly budgetBytes: number;
  /** The bar's filled share, 0..1 (a node over its budget fills the bar; the text says by how much). */
  readonly fraction: number;
  /** Used ÷ budget in whole percent, not capped. */
  readonly percent: number;
  /** `768 MiB of 2.0 GiB used (38%)`: the bar's figures in words, shown beside it and read out as its value. */
  readonly text: string;
}

export function memoryUse(m: NodeMemory): MemoryUse {
  const ratio = m.budget_bytes > 0 ? m.used_bytes / m.budget_bytes : m.used_bytes > 0 ? 1 : 0;
  const percent = Math.round(ratio * 100);
  return {
    usedBytes: m.used_bytes,
    budgetBytes: m.budget_bytes,
    fraction: Math.min(1, Math.max(0, ratio)),
    percent,
    text: `${formatBytes(m.used_bytes)} of ${formatBytes(m.budget_bytes)} used (${percent}%)`,
  };
}

/** One pool of a node, as the node's "loaded models" list shows it. */
export interface NodeModel {
  readonly poolId: string;
  /** The model's ref (the pool's first model). */
  readonly model: string;
  readonly aliases: readonly string[];
  /** `catalog`: loaded on demand; `config`: a static pool of the node's config. */
  readonly origin: 'catalog' | 'config';
  readonly memoryBytes: number | undefined;
  /** `idle 30 s`, `busy` (a slot is leased), or the pool's state when it does not serve (`provisioning`, `failed` …). */
  readonly activity: string;
  readonly idleSince: string | undefined;
}

function activity(p: ClusterPool, now: number): string {
  if (p.node_state === 'offline') return `${p.state} (node offline)`;
  if (p.state !== 'ready') return p.state;
  if (p.draining) return 'draining';
  if (p.idle_since === undefined) return 'busy';
  const ago = formatAgo(p.idle_since, now);
  return ago === 'just now' ? 'idle' : `idle ${ago.replace(/ ago$/, '')}`;
}

/** The pools of `nodeId`, in the snapshot's order. */
export function nodeModels(snapshot: DashboardSnapshot, nodeId: string): NodeModel[] {
  const now = snapshot.generated_at_ms;
  return snapshot.pools
    .filter((p) => p.node_id === nodeId)
    .map((p) => ({
      poolId: p.pool_id,
      model: p.models[0] ?? '—',
      aliases: p.aliases ?? [],
      origin: p.origin ?? 'config',
      memoryBytes: p.memory_bytes,
      activity: activity(p, now),
      idleSince: p.idle_since,
    }));
}
