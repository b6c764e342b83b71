import { z } from 'zod';
import type { AcquireOutcome, CreateOutcome, StoredTask, TaskCreate, TaskOwnershipStore, TransitionOutcome } from '../task-ownership-store.js';
import type { LuaScript } from './lua-script.js';
import type { RedisConnection } from './redis-client.js';
import { TASK_ACQUIRE, TASK_CREATE, TASK_DISPATCH, TASK_END, TASK_RENEW, TASK_REQUEUE } from './task-scripts.js';

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

/** Task records with owner leases and fences in Redis (scripts in task-scripts.ts). */
export class RedisTasks implements TaskOwnershipStore {
  readonly #redis: RedisConnection;

  constructor(redis: RedisConnection) {
    this.#redis = redis;
  }

  #key(id: string): string {
    return `${this.#redis.prefix}task:${id}`;
  }

  async create({ id, owner, record, ttlMs, lifetimeMs }: TaskCreate): Promise<CreateOutcome> {
    const r = (await this.#redis.eval(TASK_CREATE, [this.#key(id)], [owner, record, ttlMs, Math.max(1, Math.round(lifetimeMs))])) as [string, number?, number?];
    return r[0] === 'ok' ? { ok: true, fence: r[1] as number, ownerUntil: r[2] as number } : { ok: false, reason: 'exists' };
  }

  async acquire(id: string, owner: string, ttlMs: number): Promise<AcquireOutcome> {
    const r = (await this.#redis.eval(TASK_ACQUIRE, [this.#key(id)], [owner, ttlMs])) as [string, (string | number)?, number?];
    switch (r[0]) {
      case 'ok':
        return { ok: true, fence: r[1] as number, ownerUntil: r[2] as number };
      case 'held':
        return { ok: false, reason: 'held', owner: r[1] as string, ownerUntil: r[2] as number };
      case 'unknown':
        return { ok: false, reason: 'unknown' };
      default:
        return { ok: false, reason: 'state', state: 'ended' };
    }
  }

  renew(id: string, fence: number, ttlMs: number): Promise<TransitionOutcome> {
    return this.#transition(TASK_RENEW, id, [fence, ttlMs]);
  }

  dispatch(id: string, fence: number, placement: string): Promise<TransitionOutcome> {
    return this.#transition(TASK_DISPATCH, id, [fence, placement]);
  }

  requeue(id: string, fence: number): Promise<TransitionOutcome> {
    return this.#transition(TASK_REQUEUE, id, [fence]);
  }

  end(id: string, fence: number, outcome: string, retainMs: number): Promise<TransitionOutcome> {
    return this.#transition(TASK_END, id, [fence, outcome, Math.round(retainMs)]);
  }

  async get(id: string): Promise<StoredTask | undefined> {
    const h = await this.#redis.call((c) => c.hgetall(this.#key(id)), 'task get');
    return h.state === undefined ? undefined : parseTask(id, h);
  }

  async #transition(script: LuaScript, id: string, args: (string | number)[]): Promise<TransitionOutcome> {
    const r = (await this.#redis.eval(script, [this.#key(id)], args)) as [string, unknown?, unknown?];
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
