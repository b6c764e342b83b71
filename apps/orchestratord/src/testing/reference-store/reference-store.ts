// Test-only: the reference model of the shared store, in memory.
import {
  ClusterStoreSettingsSchema,
  type ClusterStoreDeps,
  type ClusterStoreSettingsInput,
  type SharedStore,
} from '../../store/cluster-store.js';
import { createLocalStore } from '../../store/memory/memory-store.js';
import { ReferenceLifecycle } from './reference-lifecycle.js';
import { ReferenceNodes } from './reference-nodes.js';
import { ReferenceQueue } from './reference-queue.js';
import { ReferenceSessions } from './reference-sessions.js';
import { ReferenceSignals } from './reference-signals.js';
import { ReferenceSlotLeases } from './reference-slot-leases.js';
import { ReferenceTasks } from './reference-tasks.js';

/** The reference store, with its parts' own types (the tests read the queue's order from it). */
export interface ReferenceStore extends SharedStore {
  readonly queue: ReferenceQueue;
}

/**
 * Every part of a shared store in plain objects: the model the Redis store's contract tests hold it
 * to (each store/*.test.ts runs against both). The parts a process uses whatever its store (rate
 * limits, replicas, activity) are the product's in-process ones; the shared parts — nodes, slot
 * leases, queue, task records, sessions, the lifecycle steps composed over them with no await
 * between, signals — exist only here: one process keeps those in its own synchronous objects (the
 * node registry, the local coordinator), so the product never builds them in memory. One object
 * serves every "replica" of a test (a single process is its only client).
 */
export function createReferenceStore(
  settings: ClusterStoreSettingsInput,
  { clock }: Pick<ClusterStoreDeps, 'clock'>,
): ReferenceStore {
  const s = ClusterStoreSettingsSchema.parse(settings);
  const signals = new ReferenceSignals();
  const queue = new ReferenceQueue(s.admission_capacity, s.admission_policy, clock, signals);
  const tasks = new ReferenceTasks(clock);
  const leases = new ReferenceSlotLeases(clock, signals);
  const sessions = new ReferenceSessions(
    { ttlMs: s.session_ttl_ms, maxSessions: s.session_max, tokenBudget: s.session_token_budget },
    clock,
  );
  return {
    ...createLocalStore({ clock, retention: { maxCount: s.task_retention_count } }),
    shared: true,
    nodes: new ReferenceNodes(clock, s.heartbeat_interval_ms),
    leases,
    queue,
    tasks,
    sessions,
    lifecycle: new ReferenceLifecycle(queue, tasks, sessions, leases),
    signals,
  };
}
