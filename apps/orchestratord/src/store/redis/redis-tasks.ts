import { z } from 'zod';
import type { AcquireOutcome, CreateOutcome, OwnedBy, OwnedTask, StoredTask, TaskCreate, TaskOwnershipStore, TransitionOutcome } from '../task-ownership-store.js';
import type { LuaScript } from './lua-script.js';
import type { RedisConnection } from './redis-client.js';
import { TASK_ACQUIRE, TASK_CREATE, TASK_DISPATCH, TASK_END, TASK_LAPSED, TASK_RENEW, TASK_RENEW_MANY, TASK_REQUEUE, TASK_SEIZE } from './task-scripts.js';

const TaskHashSchema = z.object({
  state: z.enum(['queued', 'running', 'ended']),
  owner: z.string(),
  owner_until: z.coerce.number(),
  fence: z.coerce.number().int(),
  attempt: z.coerce.number().int(),
  record: z.string(),
  placement: z.string().optional(),
  outcome: z.string().optional(),
});

export function parseTask(id: string, h: Record<string, string>): StoredTask {
  const t = TaskHashSchema.parse(h);
  return { id, state: t.state, owner: t.owner, ownerUntil: t.owner_until, fence: t.fence, attempt: t.attempt, record: t.record, placement: t.placement, outcome: t.outcome };
}

export function fromFlat(flat: readonly string[]): Record<string, string> {
  const h: Record<string, string> = {};
  for (let i = 0; i + 1 < flat.length; i += 2) h[flat[i] as string] = flat[i + 1] as string;
  return h;
}

/** The answer of TASK_ACQUIRE or TASK_SEIZE. */
function acquireOutcome(reply: unknown): AcquireOutcome {
  const r = reply as [string, (string | number)?, number?];
  switch (r[0]) {
    case 'ok':
      return { ok: true, fence: r[1] as number, ownerUntil: r[2] as number };
    case 'held':
      return { ok: false, reason: 'held', owner: r[1] as string, ownerUntil: r[2] as number };
    case 'fenced':
      return { ok: false, reason: 'fenced', owner: r[1] as string, fence: r[2] as number };
    case 'unknown':
      return { ok: false, reason: 'unknown' };
    default:
      return { ok: false, reason: 'state', state: 'ended' };
  }
}

/** Task records with owner leases and fences in Redis (scripts in task-scripts.ts). */
export class RedisTasks implements TaskOwnershipStore {
  readonly #redis: RedisConnection;

  constructor(redis: RedisConnection) {
    this.#redis = redis;
  }

  #key(id: string): string {
    return `${this.#redis.prefix}task:${id}`;
  }

  get #leases(): string {
    return `${this.#redis.prefix}tasks:leases`;
  }

  async create({ id, owner, record, ttlMs, lifetimeMs }: TaskCreate): Promise<CreateOutcome> {
    const r = (await this.#redis.eval(TASK_CREATE, [this.#key(id), this.#leases], [owner, record, ttlMs, Math.max(1, Math.round(lifetimeMs)), id])) as [string, number?, number?];
    return r[0] === 'ok' ? { ok: true, fence: r[1] as number, ownerUntil: r[2] as number } : { ok: false, reason: 'exists' };
  }

  async acquire(id: string, owner: string, ttlMs: number, record?: string): Promise<AcquireOutcome> {
    return acquireOutcome(await this.#redis.eval(TASK_ACQUIRE, [this.#key(id), this.#leases], [owner, ttlMs, id, record ?? '']));
  }

  async seize(id: string, from: OwnedBy, owner: string, ttlMs: number, record?: string): Promise<AcquireOutcome> {
    return acquireOutcome(await this.#redis.eval(TASK_SEIZE, [this.#key(id), this.#leases], [from.owner, from.fence, owner, ttlMs, id, record ?? '']));
  }

  renew(id: string, fence: number, ttlMs: number): Promise<TransitionOutcome> {
    return this.#transition(TASK_RENEW, id, [fence, ttlMs, id], true);
  }

  async renewMany(tasks: readonly OwnedTask[], ttlMs: number): Promise<string[]> {
    if (tasks.length === 0) return [];
    const keys = [this.#leases, ...tasks.map((t) => this.#key(t.id))];
    const args: (string | number)[] = [ttlMs];
    for (const t of tasks) args.push(t.id, t.fence);
    return (await this.#redis.eval(TASK_RENEW_MANY, keys, args)) as string[];
  }

  async lapsed(limit: number): Promise<string[]> {
    return (await this.#redis.eval(TASK_LAPSED, [this.#leases], [limit, this.#redis.prefix])) as string[];
  }

  dispatch(id: string, fence: number, placement: string): Promise<TransitionOutcome> {
    return this.#transition(TASK_DISPATCH, id, [fence, placement]);
  }

  requeue(id: string, fence: number): Promise<TransitionOutcome> {
    return this.#transition(TASK_REQUEUE, id, [fence]);
  }

  end(id: string, fence: number, outcome: string, retainMs: number): Promise<TransitionOutcome> {
    return this.#transition(TASK_END, id, [fence, outcome, Math.round(retainMs), id], true);
  }

  async get(id: string): Promise<StoredTask | undefined> {
    const h = await this.#redis.call((c) => c.hgetall(this.#key(id)), 'task get');
    return h.state === undefined ? undefined : parseTask(id, h);
  }

  /** `leases`: the script also takes the lease index as KEYS[2]. */
  async #transition(script: LuaScript, id: string, args: (string | number)[], leases = false): Promise<TransitionOutcome> {
    const r = (await this.#redis.eval(script, leases ? [this.#key(id), this.#leases] : [this.#key(id)], args)) as [string, unknown?, unknown?];
    switch (r[0]) {
      case 'ok':
        return { ok: true, task: parseTask(id, fromFlat(r[1] as string[])) };
      case 'unknown':
        return { ok: false, reason: 'unknown' };
      case 'fenced':
        return { ok: false, reason: 'fenced', owner: r[1] as string, fence: r[2] as number };
      default:
        return { ok: false, reason: 'state', state: z.enum(['queued', 'running', 'ended']).parse(r[1]) };
    }
  }
}
