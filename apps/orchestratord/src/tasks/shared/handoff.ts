import type { AttemptOutcome } from '../../upstream/dispatch-attempt.js';
import type { ClusterTasks } from './cluster-tasks.js';
import type { TaskRecord } from '../task-record.js';

/**
 * Whether an attempt that ended without its task's end (it failed, or would be placed again) may
 * have lost the task to another replica: a running `/v2` stream (its dispatch held by the node for
 * a re-attach, `reattach_ms`) can be taken over by a replica that found this one's owner lease
 * lapsed — this replica stalled (a loaded machine, a GC pause) but lives — and that replica's
 * re-attach ends this one's connection to the node without an end event ("last attacher wins").
 * Failing the task here would send its client `error WORKER_RESET` while the generation goes on
 * elsewhere (`up-stall.process.test.ts` provokes it with a SIGSTOP); placing it again would
 * replace the generation under the new owner's feet.
 */
export function mayHaveMoved(task: TaskRecord, outcome: AttemptOutcome): boolean {
  return (outcome.kind === 'fail' || outcome.kind === 'retry') && followsMoves(task);
}

/**
 * Whether the task's client can follow it to another replica: a `/v2` event stream, read again
 * with `Last-Event-ID` through any replica. A `/v1` stream or answer (and a door's call) has no
 * resume: its client is on this replica's connection.
 */
export function followsMoves(task: Pick<TaskRecord, 'delivery' | 'request'>): boolean {
  return task.delivery === 'events' && task.request.call === undefined;
}

/**
 * The replica that owns task `id` now, when it is another one (then that replica ends the task, and
 * this one hands it off: the task service's `#end` with `movedTo`); undefined when it is still this replica's, or the
 * store does not know or cannot be reached — the attempt's own outcome applies then.
 */
function movedTo(cluster: Pick<ClusterTasks, 'ownerOf' | 'replicaId'>, id: string): Promise<string | undefined> {
  return cluster.ownerOf(id).then(
    (owner) => (owner !== undefined && owner.replica !== cluster.replicaId ? owner.replica : undefined),
    () => undefined,
  );
}

/**
 * Asks the store who owns the task ({@link movedTo}): `stay()` when it is still this replica's (or
 * unknown, or the store unreachable), `move(to)` when another replica took it over; nothing when
 * the task ended meanwhile (a cancel).
 */
export async function unlessMoved(
  task: TaskRecord,
  cluster: Pick<ClusterTasks, 'ownerOf' | 'replicaId'>,
  stay: () => void,
  move: (to: string) => void,
): Promise<void> {
  const to = await movedTo(cluster, task.id);
  if (task.state === 'ended') return;
  if (to === undefined) stay();
  else move(to);
}
