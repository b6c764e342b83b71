import type { NodeRegistry, RegistryEvent } from '../registry/node-registry.js';
import type { PoolView } from '../registry/pool-view.js';
import type { Penalty } from '../upstream/dispatch-attempt.js';
import { NodeLostError } from '../upstream/upstream-errors.js';
import type { TaskRecord } from './task-record.js';

/**
 * What a failed attempt says about its pool goes to the registry: a saturated pool is skipped for
 * a moment; any other failure marks the pool (or its node) suspect, counts against the task's
 * retries and keeps the task off that pool.
 */
export function applyPenalty(registry: NodeRegistry, task: TaskRecord, view: PoolView, penalty: Penalty | undefined): void {
  if (penalty === undefined || penalty === 'leased') return;
  if (penalty === 'saturated') {
    registry.markSaturated(view.node_id, view.pool_id);
    return;
  }
  registry.markSuspect(view.node_id, view.pool_id, penalty === 'node');
  task.failedAttempts += 1;
  task.ticket.avoid(view);
}

/**
 * A node that stopped heartbeating (or left) may be frozen rather than dead: its sockets stay
 * open and a dispatch to it would hang until the task's deadline. Aborts the attempts running
 * there with a {@link NodeLostError}; the failure policy re-places them or ends them.
 */
export function abandonNode(running: Iterable<TaskRecord>, e: RegistryEvent): void {
  for (const task of running) {
    if (task.placement?.node_id !== e.nodeId || task.state !== 'running') continue;
    task.controller?.abort(new NodeLostError(`node ${e.nodeId} went ${e.type === 'offline' ? 'offline (missed heartbeats)' : 'away (deregistered)'} while running the task`));
  }
}
