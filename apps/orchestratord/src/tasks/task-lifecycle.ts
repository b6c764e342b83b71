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

/**
 * This replica's hold on the task's shared record, with replicas (spec 65); always `none` in one
 * process. Why each exists:
 * - `held`: admitted or taken over here under `fence`; its lease is renewed on every tick;
 * - `lost`: let go — a renewal was refused (another replica took it over), or none reached the
 *   store for a whole lease — with the fence it had and when (the clock's time): it is not
 *   dispatched from here until it is granted back (`held` again) or it ends;
 * - `none`: never held here, released at its end, or handed off to the replica that took it.
 */
export type Ownership =
  | { readonly kind: 'none' }
  | { readonly kind: 'held'; readonly fence: number }
  | { readonly kind: 'lost'; readonly fence: number; readonly at: number };

/**
 * Where the task's end is with the shared record: `none` (one process, not ended, or nothing of it
 * this replica's to write), `unwritten` (the store could not take it yet: kept for a retry, and the
 * orphan sweep leaves the task to it), `written`.
 */
export type EndRecord = 'none' | 'unwritten' | 'written';

const NOT_HELD: Ownership = Object.freeze({ kind: 'none' });

const OWNERSHIP: Readonly<Record<Ownership['kind'], readonly Ownership['kind'][]>> = Object.freeze({
  // none → held: admitted here, or taken over from a replica that died.
  none: ['held'],
  // held → lost: let go; → none: released at its end, or handed off.
  held: ['lost', 'none'],
  // lost → held: granted back (nobody else took it); → none: it ended here (its end takes it back first), or handed off.
  lost: ['held', 'none'],
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
 * One task's lifecycle, the single owner of where it is: its state and phase ({@link TaskRecord.state}
 * and `phase` read it), and with replicas its {@link Ownership} (fence, let go), whether a claim of
 * a slot for it is under way, and whether its end is in the shared record ({@link EndRecord}).
 * Every change is a checked transition, and there is one way to end, {@link TaskLifecycle.end},
 * which says whether this call ended it (so the task service writes exactly one terminal frame, or
 * hands the task off, once). The cluster's bookkeeping (owner leases, the gate, the end writer)
 * keeps indexes of lifecycles, not states of its own.
 */
export class TaskLifecycle {
  readonly #taskId: string;
  #state: TaskState = 'queued';
  #phase: TaskPhase;
  #ending: TaskEnding | undefined;
  #ownership: Ownership = NOT_HELD;
  #claiming = false;
  #endRecord: EndRecord = 'none';

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

  get ownership(): Ownership {
    return this.#ownership;
  }

  /** The fence this replica holds the task under; 0 when it holds none (every shared record refuses 0). */
  get fence(): number {
    return this.#ownership.kind === 'held' ? this.#ownership.fence : 0;
  }

  /** Whether this replica let the task go and has not been granted it back. */
  get lost(): boolean {
    return this.#ownership.kind === 'lost';
  }

  /** The task is this replica's under `fence`: admitted, taken over, or granted back after it was let go. */
  hold(fence: number): void {
    this.#own({ kind: 'held', fence });
  }

  /** Let go at `at` (the clock's time), keeping the fence it had: its end is written under it only if no other replica took it. */
  letGo(at: number): void {
    this.#own({ kind: 'lost', fence: this.fence, at });
  }

  /**
   * Nothing of the shared record is this replica's any more (its end is on its way, or another
   * replica has it). Returns the fence to write the end under (0: none held), or, for a task it had
   * let go, `formerFence` (the end takes it back first).
   */
  release(): { fence: number | undefined; formerFence: number | undefined } {
    const was = this.#ownership;
    if (was.kind === 'none') return { fence: 0, formerFence: undefined };
    this.#own(NOT_HELD);
    return was.kind === 'lost'
      ? { fence: undefined, formerFence: was.fence }
      : { fence: was.fence, formerFence: undefined };
  }

  /** Whether a slot is being claimed for the task (out of the local line, still in the cluster's queue). */
  get claiming(): boolean {
    return this.#claiming;
  }

  /** The scheduler leased a slot for the queued task: its claim (cluster slot lease, then the take) is under way. */
  claim(): void {
    if (this.#state !== 'queued' || this.#claiming)
      throw new InvalidTaskTransitionError(
        this.#taskId,
        `${this.#state}${this.#claiming ? '/claiming' : ''}`,
        'claiming',
      );
    this.#claiming = true;
  }

  /** The claim is over, however it went (dispatched, back in line, refused, or the task ended meanwhile). */
  claimed(): void {
    this.#claiming = false;
  }

  get endRecord(): EndRecord {
    return this.#endRecord;
  }

  /** Where the end is with the shared record now; a written end stays written. */
  recordEnd(to: EndRecord): void {
    if (this.#endRecord === 'written') throw new InvalidTaskTransitionError(this.#taskId, 'end written', `end ${to}`);
    this.#endRecord = to;
  }

  #own(to: Ownership): void {
    if (!OWNERSHIP[this.#ownership.kind].includes(to.kind))
      throw new InvalidTaskTransitionError(this.#taskId, `owner ${this.#ownership.kind}`, `owner ${to.kind}`);
    this.#ownership = to;
  }

  #move(to: TaskState, phase: TaskPhase): void {
    if (!TRANSITIONS[this.#state].includes(to)) throw new InvalidTaskTransitionError(this.#taskId, this.#state, to);
    this.#state = to;
    this.#phase = phase;
  }
}
