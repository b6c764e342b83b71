import type { Log } from '@llama-orch/daemon-support';
import { candidateKey } from '../../registry/pool-view.js';
import type { TaskLifecycleStore } from '../../store/task-lifecycle-store.js';
import { TaskLifecycle } from '../task-lifecycle.js';
import type { AcquireOutcome, TaskOwnershipStore } from '../../store/task-ownership-store.js';
import type { Adoption, SharedPlacement, SharedTaskRecord, TakeoverSlots, TaskOwner } from './shared-task-types.js';

/** What a takeover reads and writes. */
export interface TakeoverDeps {
  readonly lifecycle: TaskLifecycleStore;
  readonly replicaId: string;
  readonly ownerTtlMs: number;
  /** Entries of each lane a seize looks at. */
  readonly scan: number;
  readonly tasks: TaskOwnershipStore;
  readonly logger: Log;
  /** How long an ended task's record stays readable, ms. */
  readonly retainMs: number;
  /** This replica's advertised base URL: the new record's `owner_url`. */
  readonly address: () => string | undefined;
  /** The task (`life`) is this replica's now, under `fence` (it renews it from here on). */
  readonly hold: (id: string, life: TaskLifecycle, fence: number) => void;
  /** True when the granted task is one this replica let go and still runs: it is this replica's again, nothing to adopt. */
  readonly takeBack: (id: string, fence: number) => boolean;
  /** The cluster's slot leases; undefined without them. */
  readonly slots: TakeoverSlots | undefined;
}

/**
 * Why this replica may take the task: its owner stopped renewing it (`lapsed`), or its owner's
 * address refused a connection while the owner was still a listed replica (`refused`: the process
 * is gone, its lease has not run out yet).
 */
export type TakeoverEvidence = 'lapsed' | 'refused';

/** Grants the task to this replica with `record` as its shared record (`acquire` or `seize`). */
export type Grant = (record: string) => Promise<AcquireOutcome>;

/**
 * Takes task `id` over if `grant` gives it to this replica (a new fence, and the record with this
 * replica's address): a `/v2` event-stream task that can be carried on (queued, or running with
 * its frame base) is returned for the task service to queue or re-attach; one that cannot (a `/v1`
 * stream or answer, queued or running, whose client went with its replica, or a record without
 * its request) ends `error INTERNAL` (retriable), out of the queue, its session's
 * turn closed (one `finish`), and undefined is returned, as for a task not granted or already ended. A running
 * `/v1` task that ends so gives back its dead owner's cluster slot lease at once: the node cancelled
 * its generation when the connection dropped, and the queued tasks wait for that slot.
 */
export async function takeOver(
  deps: TakeoverDeps,
  id: string,
  evidence: TakeoverEvidence,
  grant: Grant,
  seizedFrom?: string,
): Promise<Adoption | undefined> {
  const read = await deps.tasks.get(id);
  if (read === undefined || read.state === 'ended') return undefined;
  // `seizedFrom`: the task is this replica's already (TaskLifecycleStore.seizeQueued); its owner was that one
  const stored = { ...read, state: read.state, owner: seizedFrom ?? read.owner };
  const record = JSON.parse(stored.record) as SharedTaskRecord;
  const won = await grant(JSON.stringify({ ...record, owner_url: deps.address() }));
  if (!won.ok || deps.takeBack(id, won.fence)) return undefined;
  // A queued record may keep the placement of an attempt the node refused (requeued): it is
  // dispatched anew, not re-attached (which failed it WORKER_RESET and left its entry first in the
  // cluster's queue, every later task of its model waiting behind it).
  const placement =
    stored.state !== 'running' || stored.placement === undefined
      ? undefined
      : (JSON.parse(stored.placement) as Partial<SharedPlacement>);
  const request = record.request;
  // Only a `/v2` event stream can be carried on: its client reconnects through any replica. A `/v1`
  // task's client (queued or running) was on its replica's connection, so running it here would spend
  // a slot on an answer nobody reads.
  const follows = (record.delivery ?? 'events') === 'events' && request?.call === undefined;
  const resumable = follows && (stored.state === 'queued' || typeof placement?.frame_base === 'number');
  const why = evidence === 'lapsed' ? 'stopped' : 'is gone (its address refuses connections)';
  if (request !== undefined && resumable) {
    // Held from the grant on, before the task service makes the record that takes this lifecycle.
    const life = new TaskLifecycle(id);
    deps.hold(id, life, won.fence);
    const log = deps.logger.child({ correlation_id: record.correlation_id });
    deps.logger.warn(
      {
        task_id: id,
        owner: stored.owner,
        state: stored.state,
        evidence,
        human: `Took over ${stored.state} task ${id}: its replica ${stored.owner} ${why}`,
      },
      'orphaned task adopted',
    );
    return {
      id,
      previousOwner: stored.owner,
      state: stored.state,
      record: { ...record, request },
      placement: placement as SharedPlacement | undefined,
      log,
      life,
    };
  }
  const message = `replica ${stored.owner}, which ${stored.state === 'queued' ? 'admitted' : 'relayed'} the task, stopped; resubmit the task`;
  // One step: the record ends under the fence just won, a queued task's entry leaves, its session's turn closes uncounted.
  const outcome = JSON.stringify({ event: 'error', data: { code: 'INTERNAL', message, retriable: true } });
  const session = record.session_id === undefined ? undefined : { id: record.session_id, tokensOut: undefined };
  await deps.lifecycle.finish({
    id,
    fence: won.fence,
    outcome,
    retainMs: deps.retainMs,
    dequeue: stored.state === 'queued',
    session,
  });
  // A `/v2` stream's dispatch (`reattach_ms`) may still be generating on the node: its lease lapses.
  if (placement?.node_id !== undefined && placement.pool_id !== undefined && record.delivery !== 'events') {
    await deps.slots?.releaseTask(candidateKey({ node_id: placement.node_id, pool_id: placement.pool_id }), id);
  }
  deps.logger.warn(
    {
      task_id: id,
      owner: stored.owner,
      evidence,
      human: `Ended task ${id}: its replica ${stored.owner} ${why} and its client went with it`,
    },
    'orphaned task ended',
  );
  return undefined;
}

/**
 * Takes task `id` over now, before its owner's lease lapses, on evidence that `from` died (its
 * address refuses connections while it is a listed replica; http/task-owner-proxy.ts): `seize`
 * grants it only while `from` still holds it under the fence it was seen with, so of replicas
 * with the same evidence one wins, and a task ended or taken meanwhile is left alone. The queued
 * tasks of `from` go first, all to one replica (`seizeQueued`), then task `id`, then the running
 * tasks of `from` that hold a cluster slot lease ({@link slotHoldersOf}): nobody reads a `/v1` one
 * (its client went with `from`), and until it is taken over its lease keeps the queued tasks from
 * its slot. Returns the tasks adopted (for the task service to queue or re-attach), and whether
 * task `id` was one of them.
 */
export async function seizeFrom(
  deps: TakeoverDeps,
  id: string,
  from: TaskOwner,
): Promise<{ adopted: Adoption[]; found: boolean }> {
  const adopted: Adoption[] = [];
  // The lease of the task whose read found `from` dead, as that process last renewed it (below).
  const target = await deps.tasks.get(id);
  // First every queued task of `from` at the head of the lanes, in one step: a replica that found
  // it dead at the same moment gets none of them, so they are dispatched here in their order.
  const queued = await deps.lifecycle.seizeQueued(from.replica, deps.replicaId, deps.ownerTtlMs, deps.scan);
  for (const q of queued) {
    // this replica's already: acquiring it again (a new fence) writes this replica's address in the record
    const a = await takeOver(
      deps,
      q.id,
      'refused',
      (record) => deps.tasks.acquire(q.id, deps.replicaId, deps.ownerTtlMs, record),
      from.replica,
    );
    if (a !== undefined) adopted.push(a);
  }
  const seize = async (task: string, fence: number): Promise<void> => {
    const grant = (record: string) =>
      deps.tasks.seize(task, { owner: from.replica, fence }, deps.replicaId, deps.ownerTtlMs, record);
    const a = await takeOver(deps, task, 'refused', grant);
    if (a !== undefined) adopted.push(a);
  };
  const seen = new Set([id, ...queued.map((q) => q.id)]);
  if (!queued.some((q) => q.id === id)) await seize(id, from.fence);
  if (target?.owner === from.replica && target.fence === from.fence) {
    // together: the client whose read found `from` dead waits for them
    await Promise.all(
      (await slotHoldersOf(deps, from.replica, target.ownerUntil, seen)).map((t) => seize(t.id, t.fence)),
    );
  }
  return { adopted, found: adopted.some((a) => a.id === id) };
}

/**
 * The running tasks of `replica` that hold a cluster slot lease, with their fences (`skip`: ids
 * not to look at). A few leases per pool, one record read each: bounded by the cluster's slots.
 * Only those whose owner lease ends by `until` (the lease of the task whose read found `replica`
 * dead): the dead process renewed its tasks together, before it died, while a process restarted
 * with the same replica id (`llorch up`, the chaos run) admits and renews its own after that, so
 * its tasks' leases end later and a live replica's tasks are never taken for a dead one's.
 */
async function slotHoldersOf(
  deps: TakeoverDeps,
  replica: string,
  until: number,
  skip: ReadonlySet<string>,
): Promise<Array<{ id: string; fence: number }>> {
  const slots = deps.slots;
  if (slots === undefined) return [];
  const ids = new Set(
    (await Promise.all(slots.pools().map((p) => slots.holders(p)))).flat().filter((t) => !skip.has(t)),
  );
  const records = await Promise.all([...ids].map((t) => deps.tasks.get(t)));
  return records
    .filter((t) => t !== undefined && t.owner === replica && t.state === 'running' && t.ownerUntil <= until)
    .map((t) => ({ id: t!.id, fence: t!.fence }));
}
