import type { ClusterStoreDeps, LocalStore } from '../cluster-store.js';
import { MemoryActivity } from './memory-activity.js';
import { MemoryRateLimits } from './memory-rate-limits.js';
import { MemoryReplicas } from './memory-replicas.js';

/**
 * The in-process store: the parts one process uses (rate limits, its replica entry, the dashboard's
 * activity); no timers, no connections; close() has nothing to release.
 */
export function createLocalStore({ clock }: Pick<ClusterStoreDeps, 'clock'>): LocalStore {
  return {
    kind: 'memory',
    shared: false,
    rateLimits: new MemoryRateLimits(clock),
    replicas: new MemoryReplicas(clock),
    activity: new MemoryActivity(clock),
    health: () => Promise.resolve({ ok: true, kind: 'memory', latency_ms: 0 }),
    close: () => Promise.resolve(),
  };
}
