/**
 * Where an admitted task is. Why each state exists:
 * - `queued`: in this replica's line (and, with the cluster store, the cluster's queue), waiting
 *   for a slot; also after an attempt failed before its first token (requeued).
 * - `running`: a slot is leased and an attempt runs on a node (a new dispatch, or a re-attach to
 *   the generation of a task taken over from a replica that died).
 * - `ended`: nothing more happens to it here. Either its terminal frame is written (`ending:
 *   'frame'`), or another replica took it over and carries it on (`ending: 'moved'`: its readers
 *   reconnect there; no frame here). Final.
 */
export type TaskState = 'queued' | 'running' | 'ended';

/** Finer phase for narration (`metrics` frames, logs): what a queued or running task waits on. */
export type TaskPhase = 'queued' | 'preparing' | 'dispatching' | 'streaming';

/** How a task ended here (see {@link TaskState}). */
export type TaskEnding = 'frame' | 'moved';

const TRANSITIONS: Readonly<Record<TaskState, readonly TaskState[]>> = Object.freeze({
  // queued → running: dispatched (or re-attached after a takeover); → ended: cancel, deadline, eviction, failure, shutdown, handoff.
  queued: ['running', 'ended'],
  // running → queued: the attempt failed before its first token; → ended: its end, a failure, a cancel, a handoff.
  running: ['queued', 'ended'],
  ended: [],
});

/** The phases a state may be in. */
const PHASES: Readonly<Record<TaskState, readonly TaskPhase[]>> = Object.freeze({
  queued: ['queued', 'preparing'],
  running: ['dispatching', 'streaming'],
  // the phase it ended in stays, for the record
  ended: ['queued', 'preparing', 'dispatching', 'streaming'],
});

/** A move the table does not allow: a bug in the caller, never skipped. */
export class InvalidTaskTransitionError extends Error {
  override readonly name = 'InvalidTaskTransitionError';
  readonly code = 'INVALID_TASK_TRANSITION';
  constructor(
    readonly taskId: string,
    readonly from: string,
    readonly to: string,
  ) {
    super(`task ${taskId}: ${from} → ${to} is not a transition of a task's lifecycle`);
  }
}

/**
 * One task's lifecycle, the single owner of its state and phase ({@link TaskRecord.state} and
 * `phase` read it): every change is a checked transition, and there is one way to end,
 * {@link TaskLifecycle.end}, which says whether this call ended it (so the task service writes
 * exactly one terminal frame, or hands the task off, once).
 */
export class TaskLifecycle {
  readonly #taskId: string;
  #state: TaskState = 'queued';
  #phase: TaskPhase;
  #ending: TaskEnding | undefined;

  constructor(taskId: string, phase: 'queued' | 'preparing' = 'queued') {
    this.#taskId = taskId;
    this.#phase = phase;
  }

  get state(): TaskState {
    return this.#state;
  }

  get phase(): TaskPhase {
    return this.#phase;
  }

  /** How it ended; undefined while it is not ended. */
  get ending(): TaskEnding | undefined {
    return this.#ending;
  }

  /** Dispatched (or re-attached): `queued` → `running`, phase `dispatching`. */
  run(): void {
    this.#move('running', 'dispatching');
  }

  /** Back in line after an attempt failed before its first token: `running` → `queued`. */
  requeue(): void {
    this.#move('queued', 'queued');
  }

  /** The narration's phase; it must belong to the state (`streaming` only while running, …). */
  setPhase(phase: TaskPhase): void {
    if (phase === this.#phase) return;
    if (!PHASES[this.#state].includes(phase))
      throw new InvalidTaskTransitionError(this.#taskId, `${this.#state}/${this.#phase}`, `${this.#state}/${phase}`);
    this.#phase = phase;
  }

  /** Ends the task (`how`); true when this call ended it, false when it had ended already (every ending path may race another). */
  end(how: TaskEnding): boolean {
    if (this.#state === 'ended') return false;
    this.#state = 'ended';
    this.#ending = how;
    return true;
  }

  #move(to: TaskState, phase: TaskPhase): void {
    if (!TRANSITIONS[this.#state].includes(to)) throw new InvalidTaskTransitionError(this.#taskId, this.#state, to);
    this.#state = to;
    this.#phase = phase;
  }
}
