import type { QueueOverflowPolicy } from '../admission-queue-store.js';
import type { SessionLimits } from '../session-affinity-store.js';
import type {
  AdmitOutcome,
  DispatchRoom,
  FinishOutcome,
  TakeDispatchOutcome,
  TaskAdmit,
  TaskFinish,
  TaskLifecycleStore,
  TaskRequeue,
} from '../task-lifecycle-store.js';
import type { TransitionOutcome } from '../task-ownership-store.js';
import type { RedisScripts, ScriptSessionLimits } from './redis-scripts.js';
import { sessionScriptLimits } from './redis-sessions.js';

/** Admission, dispatch, requeue and end of a task, each one script (lua/task-admit.lua, task-take-dispatch.lua, task-requeue.lua, task-finish.lua, task-seize-queued.lua). */
export class RedisLifecycle implements TaskLifecycleStore {
  readonly #scripts: RedisScripts;
  readonly #queue: { capacity: number; policy: QueueOverflowPolicy };
  readonly #sessions: ScriptSessionLimits;

  constructor(
    scripts: RedisScripts,
    queue: { capacity: number; policy: QueueOverflowPolicy },
    sessions: SessionLimits,
  ) {
    this.#scripts = scripts;
    this.#queue = { capacity: queue.capacity, policy: queue.policy };
    this.#sessions = sessionScriptLimits(sessions);
  }

  admit(admit: TaskAdmit): Promise<AdmitOutcome> {
    return this.#scripts.taskAdmit(admit, this.#queue, this.#sessions);
  }

  dispatch(id: string, fence: number, placement: string, room?: DispatchRoom): Promise<TakeDispatchOutcome> {
    return this.#scripts.taskTakeDispatch(id, fence, placement, room);
  }

  requeue(r: TaskRequeue): Promise<TransitionOutcome> {
    return this.#scripts.taskRequeue(r);
  }

  finish(f: TaskFinish): Promise<FinishOutcome> {
    return this.#scripts.taskFinish(f, this.#sessions);
  }

  seizeQueued(
    from: string,
    owner: string,
    ttlMs: number,
    limit: number,
  ): Promise<Array<{ id: string; fence: number }>> {
    return this.#scripts.taskSeizeQueued(from, owner, ttlMs, limit);
  }
}
