import type { ClusterStore, ClusterStoreDeps, ClusterStoreSettings } from '../cluster-store.js';
import { MemoryActivity } from './memory-activity.js';
import { MemoryLifecycle } from './memory-lifecycle.js';
import { MemoryNodes } from './memory-nodes.js';
import { MemoryQueue } from './memory-queue.js';
import { MemoryRateLimits } from './memory-rate-limits.js';
import { MemoryReplicas } from './memory-replicas.js';
import { MemorySessions } from './memory-sessions.js';
import { MemorySignals } from './memory-signals.js';
import { MemorySlotLeases } from './memory-slot-leases.js';
import { MemoryTasks } from './memory-tasks.js';

/** The in-process store set: no timers, no connections; close() has nothing to release. */
export function createMemoryStore(s: ClusterStoreSettings, { clock }: ClusterStoreDeps): ClusterStore {
  const signals = new MemorySignals();
  const queue = new MemoryQueue(s.admission_capacity, s.admission_policy, clock, signals);
  const tasks = new MemoryTasks(clock);
  const leases = new MemorySlotLeases(clock, signals);
  const sessions = new MemorySessions({ ttlMs: s.session_ttl_ms, maxSessions: s.session_max, tokenBudget: s.session_token_budget }, clock);
  return {
    kind: 'memory',
    nodes: new MemoryNodes(clock, s.heartbeat_interval_ms),
    leases,
    queue,
    tasks,
    sessions,
    lifecycle: new MemoryLifecycle(queue, tasks, sessions, leases),
    rateLimits: new MemoryRateLimits(clock),
    replicas: new MemoryReplicas(clock),
    signals,
    activity: new MemoryActivity(clock),
    health: () => Promise.resolve({ ok: true, kind: 'memory', latency_ms: 0 }),
    close: () => Promise.resolve(),
  };
}
