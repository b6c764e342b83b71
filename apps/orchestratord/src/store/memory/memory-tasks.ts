import type { Clock } from '@llama-orch/daemon-support';
import type {
  AcquireOutcome,
  CreateOutcome,
  OwnedTask,
  StoredTask,
  StoredTaskState,
  TaskCreate,
  TaskOwnershipStore,
  TaskRefusal,
  TransitionOutcome,
} from '../task-ownership-store.js';

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

/** Task records with owner leases and fences in this process (one owner: this replica). */
export class MemoryTasks implements TaskOwnershipStore {
  readonly #tasks = new Map<string, MutableTask>();
  readonly #clock: Clock;
  /** Size at which the next create sweeps expired records (doubles with the live set). */
  #sweepAt = 1024;

  constructor(clock: Clock) {
    this.#clock = clock;
  }

  create({ id, owner, record, ttlMs, lifetimeMs }: TaskCreate): Promise<CreateOutcome> {
    const now = this.#clock.now();
    if (this.#live(id, now) !== undefined) return Promise.resolve({ ok: false, reason: 'exists' });
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
    return Promise.resolve({ ok: true, fence: 1, ownerUntil: t.ownerUntil });
  }

  acquire(id: string, owner: string, ttlMs: number, record?: string): Promise<AcquireOutcome> {
    const now = this.#clock.now();
    const t = this.#live(id, now);
    if (t === undefined) return Promise.resolve({ ok: false, reason: 'unknown' });
    if (t.state === 'ended') return Promise.resolve({ ok: false, reason: 'state', state: 'ended' });
    if (t.ownerUntil > now && t.owner !== owner) return Promise.resolve({ ok: false, reason: 'held', owner: t.owner, ownerUntil: t.ownerUntil });
    t.fence += 1;
    t.owner = owner;
    t.ownerUntil = now + ttlMs;
    if (record !== undefined) t.record = record;
    return Promise.resolve({ ok: true, fence: t.fence, ownerUntil: t.ownerUntil });
  }

  renew(id: string, fence: number, ttlMs: number): Promise<TransitionOutcome> {
    return this.#transition(id, fence, ['queued', 'running'], (t, now) => {
      t.ownerUntil = now + ttlMs;
    });
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

  /** A scan, not an index: one process holds few tasks, and only tests and single replicas use this store. */
  lapsed(limit: number): Promise<string[]> {
    const now = this.#clock.now();
    const lapsed = [...this.#tasks.values()].filter((t) => t.state !== 'ended' && t.expiresAt > now && t.ownerUntil <= now);
    return Promise.resolve(
      lapsed
        .sort((a, b) => a.ownerUntil - b.ownerUntil)
        .slice(0, limit)
        .map((t) => t.id),
    );
  }

  dispatch(id: string, fence: number, placement: string): Promise<TransitionOutcome> {
    return this.#transition(id, fence, ['queued'], (t) => {
      t.state = 'running';
      t.attempt += 1;
      t.placement = placement;
    });
  }

  requeue(id: string, fence: number): Promise<TransitionOutcome> {
    return this.#transition(id, fence, ['running'], (t) => {
      t.state = 'queued';
    });
  }

  end(id: string, fence: number, outcome: string, retainMs: number): Promise<TransitionOutcome> {
    return this.#transition(id, fence, ['queued', 'running'], (t, now) => {
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
  #transition(id: string, fence: number, from: readonly StoredTaskState[], apply: (t: MutableTask, now: number) => void): Promise<TransitionOutcome> {
    const now = this.#clock.now();
    const t = this.#live(id, now);
    let refusal: TaskRefusal | undefined;
    if (t === undefined) refusal = { ok: false, reason: 'unknown' };
    else if (t.fence !== fence || t.ownerUntil <= now) refusal = { ok: false, reason: 'fenced', owner: t.owner, fence: t.fence };
    else if (!from.includes(t.state)) refusal = { ok: false, reason: 'state', state: t.state };
    if (refusal !== undefined || t === undefined) return Promise.resolve(refusal ?? { ok: false, reason: 'unknown' });
    apply(t, now);
    return Promise.resolve({ ok: true, task: snapshot(t) });
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
  return { id: t.id, state: t.state, owner: t.owner, ownerUntil: t.ownerUntil, fence: t.fence, attempt: t.attempt, record: t.record, placement: t.placement, outcome: t.outcome };
}
