import type {
  AdmissionView,
  AdmitOutcome,
  DispatchRoom,
  FinishOutcome,
  TakeDispatchOutcome,
  TaskAdmit,
  TaskFinish,
  TaskLifecycleStore,
  TaskRequeue,
} from '../../store/task-lifecycle-store.js';
import type { TransitionOutcome } from '../../store/task-ownership-store.js';
import type { ReferenceQueue } from './reference-queue.js';
import type { ReferenceSessions } from './reference-sessions.js';
import type { ReferenceSlotLeases } from './reference-slot-leases.js';
import type { ReferenceTasks } from './reference-tasks.js';

/**
 * Admission, dispatch, requeue and end of a task in the reference model: its queue, records and
 * sessions composed synchronously (no await between the parts), so each step is as atomic
 * as its Redis script.
 */
export class ReferenceLifecycle implements TaskLifecycleStore {
  readonly #queue: ReferenceQueue;
  readonly #tasks: ReferenceTasks;
  readonly #sessions: ReferenceSessions;
  readonly #leases: ReferenceSlotLeases;

  constructor(queue: ReferenceQueue, tasks: ReferenceTasks, sessions: ReferenceSessions, leases: ReferenceSlotLeases) {
    this.#queue = queue;
    this.#tasks = tasks;
    this.#sessions = sessions;
    this.#leases = leases;
  }

  admit({ task, entry, sessionId, maxAhead }: TaskAdmit): Promise<AdmitOutcome> {
    const view: AdmissionView = {
      ahead: this.#queue.countAheadNow(entry.group, entry.lane),
      lastPool: this.#sessions.lastPoolNow(sessionId),
      budgetRemaining: this.#sessions.budgetRemainingNow(sessionId),
    };
    if (view.budgetRemaining !== undefined && view.budgetRemaining <= 0)
      return Promise.resolve({ kind: 'spent', view });
    if (maxAhead !== undefined && view.ahead > maxAhead) return Promise.resolve({ kind: 'late', view });
    if (this.#tasks.has(task.id) || this.#queue.has(task.id)) return Promise.resolve({ kind: 'exists' });
    const added = this.#queue.addNow({ ...entry, id: task.id });
    if (added.kind === 'duplicate') return Promise.resolve({ kind: 'exists' });
    if (added.kind === 'full') return Promise.resolve({ ...added, view });
    const created = this.#tasks.createNow(task);
    // Checked above: nothing ran in between.
    if (!created.ok) throw new Error(`task ${task.id} appeared while it was admitted`);
    this.#sessions.startedNow(sessionId);
    return Promise.resolve({ ...added, fence: created.fence, ownerUntil: created.ownerUntil, view });
  }

  dispatch(id: string, fence: number, placement: string, room?: DispatchRoom): Promise<TakeDispatchOutcome> {
    const take = this.#queue.canTake(id, room && ((ahead) => room.slots - this.#leases.heldNow(room.poolKey) >= ahead));
    if (take.kind !== 'taken') return Promise.resolve(take);
    const refusal = this.#tasks.dispatchRefusal(id, fence);
    if (refusal !== undefined) return Promise.resolve({ kind: 'refused', refusal });
    this.#queue.removeNow(id);
    const moved = this.#tasks.dispatchNow(id, fence, placement);
    if (!moved.ok) throw new Error(`task ${id} refused a dispatch it allowed a moment before (${moved.reason})`);
    return Promise.resolve({ kind: 'taken', entry: take.entry, task: moved.task });
  }

  requeue({ id, fence, entry }: TaskRequeue): Promise<TransitionOutcome> {
    const moved = this.#tasks.requeueNow(id, fence);
    if (moved.ok) this.#queue.requeueFrontNow({ ...entry, id });
    return Promise.resolve(moved);
  }

  finish(f: TaskFinish): Promise<FinishOutcome> {
    const dequeued = f.dequeue && this.#queue.removeNow(f.id) !== undefined;
    if (f.session !== undefined) this.#sessions.endedNow(f.session.id, f.session.tokensOut, f.session.pool);
    return Promise.resolve({ record: this.#tasks.endNow(f.id, f.fence, f.outcome, f.retainMs), dequeued });
  }

  seizeQueued(
    from: string,
    owner: string,
    ttlMs: number,
    limit: number,
  ): Promise<Array<{ id: string; fence: number }>> {
    const out: Array<{ id: string; fence: number }> = [];
    for (const entry of this.#queue.headsNow(limit)) {
      const fence = entry.payload === from ? this.#tasks.seizeQueuedNow(entry.id, from, owner, ttlMs) : undefined;
      if (fence !== undefined) out.push({ id: entry.id, fence });
    }
    return Promise.resolve(out);
  }
}
