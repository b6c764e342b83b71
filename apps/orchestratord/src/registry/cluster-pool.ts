import type { ClusterPool } from '@llama-orch/contracts';
import type { PoolView } from './pool-view.js';

/**
 * A pool as the cluster's read routes show it (`GET /v2/pools`, the dashboard): the node's last
 * report with orchestratord's own accounting on top (`slots_free` is the effective free count,
 * `leased` our leases). Optional fields appear only when the node reported them.
 */
export function toClusterPool(v: PoolView): ClusterPool {
  const p: ClusterPool = {
    pool_id: v.pool_id,
    node_id: v.node_id,
    node_state: v.node_state,
    state: v.state,
    ready: v.ready,
    draining: v.draining,
    slots_total: v.slots_total,
    slots_free: v.free,
    leased: v.leased,
    models: [...v.models],
    engine_version: v.snapshot.engine_version,
  };
  if (v.aliases !== undefined && v.aliases.length > 0) p.aliases = [...v.aliases];
  if (v.snapshot.vram_free_bytes !== undefined) p.vram_free_bytes = v.snapshot.vram_free_bytes;
  if (v.snapshot.last_error !== undefined) p.last_error = v.snapshot.last_error;
  if (v.snapshot.progress !== undefined) p.progress = v.snapshot.progress;
  if (v.capabilities !== undefined) p.capabilities = [...v.capabilities];
  if (v.snapshot.origin !== undefined) p.origin = v.snapshot.origin;
  if (v.snapshot.memory_bytes !== undefined) p.memory_bytes = v.snapshot.memory_bytes;
  if (v.snapshot.idle_since !== undefined) p.idle_since = v.snapshot.idle_since;
  return p;
}
