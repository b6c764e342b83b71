import { z } from 'zod';
import { EVICTED_KEPT_MS, type QueueOverflowPolicy } from '../admission-queue-store.js';
import type { SessionLimits } from '../session-affinity-store.js';
import type { TaskRefusal } from '../task-ownership-store.js';
import type { AdmissionView, AdmitOutcome, DispatchRoom, FinishOutcome, TakeDispatchOutcome, TaskAdmit, TaskFinish, TaskLifecycleStore } from '../task-lifecycle-store.js';
import { TASK_ADMIT } from './admit-script.js';
import { TASK_TAKE_DISPATCH } from './dispatch-script.js';
import { TASK_FINISH } from './end-script.js';
import { TASK_SEIZE_QUEUED } from './seize-script.js';
import type { RedisConnection } from './redis-client.js';
import { parseEntry } from './redis-queue.js';
import { ACTIVE_SESSION_CAP_MS } from './redis-sessions.js';
import { slotLeasesKey } from './redis-slot-leases.js';
import { fromFlat, parseTask } from './redis-tasks.js';

const StateSchema = z.enum(['queued', 'running', 'ended']);

/** A refusal as the record scripts answer it: ['unknown'] | ['fenced', owner, fence] | ['state', state]. */
function refusalOf(kind: unknown, a: unknown, b: unknown): TaskRefusal {
  if (kind === 'unknown') return { ok: false, reason: 'unknown' };
  if (kind === 'fenced') return { ok: false, reason: 'fenced', owner: String(a), fence: Number(b) };
  return { ok: false, reason: 'state', state: StateSchema.parse(a) };
}

/** Admission, dispatch and end of a task, each one script (admit-script.ts, dispatch-script.ts, end-script.ts). */
export class RedisLifecycle implements TaskLifecycleStore {
  readonly #redis: RedisConnection;
  readonly #queueKeys: readonly string[];
  readonly #capacity: number;
  readonly #policy: QueueOverflowPolicy;
  readonly #sessions: SessionLimits;

  constructor(redis: RedisConnection, queue: { capacity: number; policy: QueueOverflowPolicy }, sessions: SessionLimits) {
    this.#redis = redis;
    const p = redis.prefix;
    this.#queueKeys = [`${p}q:lane:interactive`, `${p}q:lane:batch`, `${p}q:entries`, `${p}q:deadlines`];
    this.#capacity = queue.capacity;
    this.#policy = queue.policy;
    this.#sessions = sessions;
  }

  #task(id: string): string {
    return `${this.#redis.prefix}task:${id}`;
  }

  #session(id: string): string {
    return `${this.#redis.prefix}session:${id}`;
  }

  #cap(): number {
    return Math.max(ACTIVE_SESSION_CAP_MS, this.#sessions.ttlMs);
  }

  async admit({ task, entry, sessionId, maxAhead }: TaskAdmit): Promise<AdmitOutcome> {
    const keys = [...this.#queueKeys, this.#task(task.id), this.#session(sessionId), `${this.#redis.prefix}tasks:leases`];
    const deadline = entry.deadlineMs === undefined ? '' : Math.max(0, Math.round(entry.deadlineMs));
    const args = [this.#redis.prefix, task.id, entry.lane, entry.group, entry.payload, deadline, this.#capacity, this.#policy, EVICTED_KEPT_MS];
    args.push(task.owner, task.record, task.ttlMs, Math.max(1, Math.round(task.lifetimeMs)), this.#cap());
    args.push(this.#sessions.tokenBudget ?? '', maxAhead === undefined ? '' : Math.floor(maxAhead));
    const [outcome, ahead, nodeId, poolId, tokensOut, ...rest] = (await this.#redis.eval(TASK_ADMIT, keys, args)) as [string, number, string, string, string, ...unknown[]];
    const budget = this.#sessions.tokenBudget;
    const view: AdmissionView = {
      ahead,
      lastPool: poolId === '' ? undefined : { node_id: nodeId, pool_id: poolId },
      budgetRemaining: budget === undefined ? undefined : budget - (tokensOut === '' ? 0 : Number(tokensOut)),
    };
    switch (outcome) {
      case 'queued': {
        const [position, victim, victimJson, ownerUntil] = rest as [number, string, string, number];
        const granted = { kind: 'queued' as const, position, fence: 1, ownerUntil, view };
        return victim === '' ? granted : { ...granted, evicted: parseEntry(victim, victimJson) };
      }
      case 'exists':
        return { kind: 'exists' };
      case 'full':
        return { kind: 'full', policy: this.#policy, view };
      case 'spent':
        return { kind: 'spent', view };
      default:
        return { kind: 'late', view };
    }
  }

  async dispatch(id: string, fence: number, placement: string, room?: DispatchRoom): Promise<TakeDispatchOutcome> {
    const keys = [...this.#queueKeys, this.#task(id), room === undefined ? this.#task(id) : slotLeasesKey(this.#redis.prefix, room.poolKey)];
    const r = (await this.#redis.eval(TASK_TAKE_DISPATCH, keys, [this.#redis.prefix, id, fence, placement, room?.slots ?? ''])) as unknown[];
    switch (r[0]) {
      case 'taken':
        return { kind: 'taken', entry: parseEntry(id, r[1] as string), task: parseTask(id, fromFlat(r[2] as string[])) };
      case 'behind':
        return { kind: 'behind', first: String(r[1]) };
      case 'absent':
        return { kind: 'absent' };
      default:
        return { kind: 'refused', refusal: refusalOf(r[1], r[2], r[3]) };
    }
  }

  async finish(f: TaskFinish): Promise<FinishOutcome> {
    const s = f.session;
    const keys = [...this.#queueKeys, this.#task(f.id), s === undefined ? this.#task(f.id) : this.#session(s.id), `${this.#redis.prefix}tasks:leases`];
    const args = [this.#redis.prefix, f.id, f.fence, f.outcome, Math.round(f.retainMs), f.dequeue ? '1' : '0'];
    args.push(s === undefined ? '' : '1', s?.tokensOut ?? '', s?.pool?.node_id ?? '', s?.pool?.pool_id ?? '', this.#sessions.ttlMs, this.#cap());
    const r = (await this.#redis.eval(TASK_FINISH, keys, args)) as unknown[];
    if (r[0] === 'ok') return { record: { ok: true, task: parseTask(f.id, fromFlat(r[1] as string[])) }, dequeued: r[2] === 1 };
    return { record: refusalOf(r[0], r[2], r[3]), dequeued: r[1] === 1 };
  }

  async seizeQueued(from: string, owner: string, ttlMs: number, limit: number): Promise<Array<{ id: string; fence: number }>> {
    const keys = [...this.#queueKeys.slice(0, 3), `${this.#redis.prefix}tasks:leases`];
    const flat = (await this.#redis.eval(TASK_SEIZE_QUEUED, keys, [this.#redis.prefix, from, owner, ttlMs, limit])) as (string | number)[];
    const out: Array<{ id: string; fence: number }> = [];
    for (let i = 0; i + 1 < flat.length; i += 2) out.push({ id: String(flat[i]), fence: Number(flat[i + 1]) });
    return out;
  }
}
