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
export function applyPenalty(
  registry: NodeRegistry,
  task: TaskRecord,
  view: PoolView,
  penalty: Penalty | undefined,
): void {
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
    task.controller?.abort(
      new NodeLostError(
        `node ${e.nodeId} went ${e.type === 'offline' ? 'offline (missed heartbeats)' : 'away (deregistered)'} while running the task`,
      ),
    );
  }
}

/** Heartbeats in a row that must find a silent attempt's pool idle before the attempt is lost. */
export const QUIET_BEATS_LOST = 2;

/**
 * A dispatch whose connection died silently (half-open: packets dropped, no RST or FIN) would wait
 * for the task's deadline, since dispatch bodies have no idle timeout (prompt processing may be
 * silent for long) and the node, heartbeating over its own connection, stays online. The node's
 * heartbeats tell the two apart: a live attempt holds one of its pool's slots until its `end` is
 * sent. So an attempt that relayed nothing while {@link QUIET_BEATS_LOST} heartbeats in a row, each
 * sent after its last progress was seen here (and the same heartbeat counted once), reported its
 * pool with every slot free is aborted with a {@link NodeLostError}: the failure policy re-places it
 * (no token yet) or ends it `error WORKER_RESET`. Two beats, not one: the second is sent an interval
 * after the first, so an `end` written just before the first has had an interval to arrive.
 * A pool with any slot busy (another task) hides a dead attempt until it idles; a node that held
 * the slot while blocked writing to the dead connection too. Called on every `heartbeat` event.
 */
export function abandonSilentDispatches(
  running: Iterable<TaskRecord>,
  registry: Pick<NodeRegistry, 'lastSeen' | 'poolsWithId'>,
  nodeId: string,
  now: number,
): void {
  let sentAt: number | undefined;
  for (const task of running) {
    const q = task.quiet;
    const placement = task.placement;
    if (q === undefined || placement?.node_id !== nodeId || task.state !== 'running') continue;
    if (task.tokens !== q.tokens) {
      q.tokens = task.tokens;
      q.since = now;
      q.beats = 0;
      continue;
    }
    sentAt ??= registry.lastSeen(nodeId) ?? 0;
    if (sentAt <= q.since || sentAt === q.lastBeat) continue;
    const snapshot = registry.poolsWithId(placement.pool_id).find((v) => v.node_id === nodeId)?.snapshot;
    if (snapshot === undefined || snapshot.slots_total === 0 || snapshot.slots_free < snapshot.slots_total) {
      q.beats = 0;
      continue;
    }
    q.beats += 1;
    q.lastBeat = sentAt;
    if (q.beats >= QUIET_BEATS_LOST) {
      task.controller?.abort(
        new NodeLostError(
          `node ${nodeId} reported pool ${placement.pool_id} idle in ${q.beats} heartbeats while the dispatch sent nothing: its connection is lost (half-open)`,
        ),
      );
    }
  }
}
