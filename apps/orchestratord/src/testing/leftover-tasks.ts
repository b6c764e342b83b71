// Test-only: what a replica that died leaves in the cluster store, written the way that replica wrote it.
import type { QueueLane } from '../store/admission-queue-store.js';
import type { SharedStore } from '../store/cluster-store.js';

/** A task of a dead replica. */
export interface LeftTask {
  readonly id: string;
  /** The dead replica's id: the record's owner and the queue entry's payload. */
  readonly owner: string;
  /** Its shared record (`SharedTaskRecord`'s fields, as much as the test needs). */
  readonly record: Record<string, unknown>;
  readonly lane: QueueLane;
  /** The owner lease it left, ms: never renewed, so it lapses then (a long one: only evidence of death explains a takeover). */
  readonly ownerTtlMs: number;
  /** @default 'm' */
  readonly group?: string;
  /** @default 60_000 */
  readonly lifetimeMs?: number;
}

/**
 * How far the dead replica had got with it: `queued` (admitted), `running` (dispatched with that
 * placement), or `requeued` (dispatched with that placement, the attempt failed before its first
 * token: the record back to `queued`, keeping the placement, its entry at the head of its lane).
 */
export type LeftState =
  | { readonly state: 'queued' }
  | { readonly state: 'running' | 'requeued'; readonly placement: Record<string, unknown> };

/**
 * Writes the task through the store's own steps, as its replica did: the admission (record with
 * fence 1 and the owner lease, queue entry at the back of its lane, the session's started turn —
 * the record's `session_id`, else one of its own), then the dispatch and the requeue the state
 * asks for. The dispatch passes whatever is queued ahead of it. Returns the admission's queue
 * position; throws when a step is refused.
 */
export async function leaveTask(
  store: SharedStore,
  t: LeftTask,
  how: LeftState = { state: 'queued' },
): Promise<{ position: number }> {
  const sessionId = typeof t.record.session_id === 'string' ? t.record.session_id : `left-${t.id}`;
  const admitted = await store.lifecycle.admit({
    task: {
      id: t.id,
      owner: t.owner,
      record: JSON.stringify(t.record),
      ttlMs: t.ownerTtlMs,
      lifetimeMs: t.lifetimeMs ?? 60_000,
    },
    entry: { lane: t.lane, group: t.group ?? 'm', payload: t.owner },
    sessionId,
  });
  if (admitted.kind !== 'queued') throw new Error(`leftover ${t.id}: admission answered ${admitted.kind}`);
  if (how.state === 'queued') return { position: admitted.position };
  // Room on a pool nobody leases: the dispatch passes every entry ahead of it.
  const taken = await store.lifecycle.dispatch(t.id, admitted.fence, JSON.stringify(how.placement), {
    poolKey: `left:${t.id}`,
    slots: 1_000_000,
  });
  if (taken.kind !== 'taken') throw new Error(`leftover ${t.id}: dispatch answered ${taken.kind}`);
  if (how.state === 'requeued') {
    const moved = await store.lifecycle.requeue({
      id: t.id,
      fence: admitted.fence,
      entry: { lane: t.lane, group: t.group ?? 'm', payload: t.owner },
    });
    if (!moved.ok) throw new Error(`leftover ${t.id}: requeue answered ${moved.reason}`);
  }
  return { position: admitted.position };
}
