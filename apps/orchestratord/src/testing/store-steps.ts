// Test-only: a task's steps through the cluster store, as the task service takes them, for the store's contract tests.
import { randomUUID } from 'node:crypto';
import type { QueueLane } from '../store/admission-queue-store.js';
import type { SharedStore } from '../store/cluster-store.js';
import type { AdmissionView, TaskAdmit } from '../store/task-lifecycle-store.js';

export interface AdmissionOptions {
  readonly lane?: QueueLane;
  /** The model; @default 'm' */
  readonly group?: string;
  /** @default `s-<id>` */
  readonly session?: string;
  /** The owner lease, ms. @default 10_000 */
  readonly ttlMs?: number;
  /** How long the record is kept if it never ends, ms. @default 60_000 */
  readonly lifetimeMs?: number;
  /** The entry's deadline from now, ms. @default 60_000 */
  readonly deadlineMs?: number;
}

/** Task `id`'s admission by replica `owner` (the entry's payload names the owner, as the task service writes it). */
export function admission(id: string, owner: string, o: AdmissionOptions = {}): TaskAdmit {
  return {
    task: { id, owner, record: JSON.stringify({ id }), ttlMs: o.ttlMs ?? 10_000, lifetimeMs: o.lifetimeMs ?? 60_000 },
    entry: { lane: o.lane ?? 'batch', group: o.group ?? 'm', payload: owner, deadlineMs: o.deadlineMs ?? 60_000 },
    sessionId: o.session ?? `s-${id}`,
  };
}

/**
 * What an admission of model `group` in `lane` for `session` reads now (entries ahead, the
 * session's pool and budget left), writing nothing: an admission that allows no entry ahead,
 * refused `late` (or `spent`) with the view it read.
 */
export async function admissionView(
  store: SharedStore,
  session: string,
  group = 'm',
  lane: QueueLane = 'batch',
): Promise<AdmissionView> {
  const r = await store.lifecycle.admit({
    ...admission(`view-${randomUUID()}`, 'viewer', { session, group, lane }),
    maxAhead: -1,
  });
  if (r.kind !== 'late' && r.kind !== 'spent')
    throw new Error(`an admission allowing nothing ahead answered ${r.kind}`);
  return r.view;
}
