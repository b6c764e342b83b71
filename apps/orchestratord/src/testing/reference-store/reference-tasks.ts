import type { Clock } from '@llama-orch/daemon-support';
import type {
  AcquireOutcome,
  OwnedBy,
  OwnedTask,
  StoredTask,
  StoredTaskState,
  TaskCreate,
  TaskOwnershipStore,
  TaskRefusal,
  TransitionOutcome,
} from '../../store/task-ownership-store.js';

type CreateOutcome =
  | { readonly ok: true; readonly fence: number; readonly ownerUntil: number }
  | { readonly ok: false; readonly reason: 'exists' };

interface MutableTask {
  id: string;
  state: StoredTaskState;
  owner: string;
  ownerUntil: number;
  fence: number;
  attempt: number;
  record: string;
  placement: string | undefined;
  outcome: string | undefined;
  /** When the record is forgotten. */
  expiresAt: number;
}

/** Task records with owner leases and fences in memory (the reference model of `TaskOwnershipStore`). */
export class ReferenceTasks implements TaskOwnershipStore {
  readonly #tasks = new Map<string, MutableTask>();
  readonly #clock: Clock;
  /** Size at which the next create sweeps expired records (doubles with the live set). */
  #sweepAt = 1024;

  constructor(clock: Clock) {
    this.#clock = clock;
  }

  /**
   * Creates a `queued` task owned by `owner` (fence 1); `exists` when the id is taken. Synchronous:
   * the reference lifecycle composes it with the queue and sessions in one step.
   */
  createNow({ id, owner, record, ttlMs, lifetimeMs }: TaskCreate): CreateOutcome {
    const now = this.#clock.now();
    if (this.#live(id, now) !== undefined) return { ok: false, reason: 'exists' };
    if (this.#tasks.size >= this.#sweepAt) this.#sweep(now);
    const t: MutableTask = {
      id,
      state: 'queued',
      owner,
      ownerUntil: now + ttlMs,
      fence: 1,
      attempt: 0,
      record,
      placement: undefined,
      outcome: undefined,
      expiresAt: now + lifetimeMs,
    };
    this.#tasks.set(id, t);
    return { ok: true, fence: 1, ownerUntil: t.ownerUntil };
  }

  /** Whether a record with this id is kept. */
  has(id: string): boolean {
    return this.#live(id, this.#clock.now()) !== undefined;
  }

  acquire(id: string, owner: string, ttlMs: number, record?: string): Promise<AcquireOutcome> {
    const now = this.#clock.now();
    const t = this.#live(id, now);
    if (t === undefined) return Promise.resolve({ ok: false, reason: 'unknown' });
    if (t.state === 'ended') return Promise.resolve({ ok: false, reason: 'state', state: 'ended' });
    if (t.ownerUntil > now && t.owner !== owner)
      return Promise.resolve({ ok: false, reason: 'held', owner: t.owner, ownerUntil: t.ownerUntil });
    t.fence += 1;
    t.owner = owner;
    t.ownerUntil = now + ttlMs;
    if (record !== undefined) t.record = record;
    return Promise.resolve({ ok: true, fence: t.fence, ownerUntil: t.ownerUntil });
  }

  seize(id: string, from: OwnedBy, owner: string, ttlMs: number, record?: string): Promise<AcquireOutcome> {
    const now = this.#clock.now();
    const t = this.#live(id, now);
    if (t === undefined) return Promise.resolve({ ok: false, reason: 'unknown' });
    if (t.state === 'ended') return Promise.resolve({ ok: false, reason: 'state', state: 'ended' });
    if (t.owner !== from.owner || t.fence !== from.fence)
      return Promise.resolve({ ok: false, reason: 'fenced', owner: t.owner, fence: t.fence });
    t.fence += 1;
    t.owner = owner;
    t.ownerUntil = now + ttlMs;
    if (record !== undefined) t.record = record;
    return Promise.resolve({ ok: true, fence: t.fence, ownerUntil: t.ownerUntil });
  }

  /** `seize` of a `queued` task `from` owns, whatever its fence, synchronously (the reference `seizeQueued`); its new fence, or undefined. */
  seizeQueuedNow(id: string, from: string, owner: string, ttlMs: number): number | undefined {
    const now = this.#clock.now();
    const t = this.#live(id, now);
    if (t?.state !== 'queued' || t.owner !== from) return undefined;
    t.fence += 1;
    t.owner = owner;
    t.ownerUntil = now + ttlMs;
    return t.fence;
  }

  renewMany(tasks: readonly OwnedTask[], ttlMs: number): Promise<string[]> {
    const now = this.#clock.now();
    const refused: string[] = [];
    for (const { id, fence } of tasks) {
      const t = this.#live(id, now);
      if (t === undefined || t.state === 'ended') continue;
      if (t.fence !== fence || t.ownerUntil <= now) refused.push(id);
      else t.ownerUntil = now + ttlMs;
    }
    return Promise.resolve(refused);
  }

  /** A scan, not an index: only the tests run this model, with few tasks. */
  lapsed(limit: number): Promise<string[]> {
    const now = this.#clock.now();
    const lapsed = [...this.#tasks.values()].filter(
      (t) => t.state !== 'ended' && t.expiresAt > now && t.ownerUntil <= now,
    );
    return Promise.resolve(
      lapsed
        .sort((a, b) => a.ownerUntil - b.ownerUntil)
        .slice(0, limit)
        .map((t) => t.id),
    );
  }

  /** What {@link dispatchNow} would refuse now (undefined: it would go). */
  dispatchRefusal(id: string, fence: number): TaskRefusal | undefined {
    return this.#refusal(this.#live(id, this.#clock.now()), fence, ['queued'], this.#clock.now());
  }

  /** `queued` → `running`, `attempt` + 1, records the placement. */
  dispatchNow(id: string, fence: number, placement: string): TransitionOutcome {
    return this.#transitionNow(id, fence, ['queued'], (t) => {
      t.state = 'running';
      t.attempt += 1;
      t.placement = placement;
    });
  }

  /** `running` → `queued` (the attempt failed before its first token), synchronously. */
  requeueNow(id: string, fence: number): TransitionOutcome {
    return this.#transitionNow(id, fence, ['running'], (t) => {
      t.state = 'queued';
    });
  }

  /** → `ended` with its outcome, kept `retainMs` for reads; exactly once. Synchronous. */
  endNow(id: string, fence: number, outcome: string, retainMs: number): TransitionOutcome {
    return this.#transitionNow(id, fence, ['queued', 'running'], (t, now) => {
      t.state = 'ended';
      t.outcome = outcome;
      t.expiresAt = now + retainMs;
    });
  }

  get(id: string): Promise<StoredTask | undefined> {
    const t = this.#live(id, this.#clock.now());
    return Promise.resolve(t === undefined ? undefined : snapshot(t));
  }

  /** Checks in the order the Redis scripts do: unknown, then fence and lease, then state. */
  #transitionNow(
    id: string,
    fence: number,
    from: readonly StoredTaskState[],
    apply: (t: MutableTask, now: number) => void,
  ): TransitionOutcome {
    const now = this.#clock.now();
    const t = this.#live(id, now);
    const refusal = this.#refusal(t, fence, from, now);
    if (refusal !== undefined || t === undefined) return refusal ?? { ok: false, reason: 'unknown' };
    apply(t, now);
    return { ok: true, task: snapshot(t) };
  }

  #refusal(
    t: MutableTask | undefined,
    fence: number,
    from: readonly StoredTaskState[],
    now: number,
  ): TaskRefusal | undefined {
    if (t === undefined) return { ok: false, reason: 'unknown' };
    if (t.fence !== fence || t.ownerUntil <= now)
      return { ok: false, reason: 'fenced', owner: t.owner, fence: t.fence };
    if (!from.includes(t.state)) return { ok: false, reason: 'state', state: t.state };
    return undefined;
  }

  #live(id: string, now: number): MutableTask | undefined {
    const t = this.#tasks.get(id);
    if (t !== undefined && t.expiresAt <= now) {
      this.#tasks.delete(id);
      return undefined;
    }
    return t;
  }

  #sweep(now: number): void {
    for (const [id, t] of this.#tasks) if (t.expiresAt <= now) this.#tasks.delete(id);
    this.#sweepAt = Math.max(1024, this.#tasks.size * 2);
  }
}

function snapshot(t: MutableTask): StoredTask {
  return {
    id: t.id,
    state: t.state,
    owner: t.owner,
    ownerUntil: t.ownerUntil,
    fence: t.fence,
    attempt: t.attempt,
    record: t.record,
    placement: t.placement,
    outcome: t.outcome,
  };
}
