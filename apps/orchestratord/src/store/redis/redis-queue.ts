import { z } from 'zod';
import {
  EVICTED_KEPT_MS,
  type AdmissionQueueStore,
  type GoneEntry,
  type QueueAddOutcome,
  type QueueEntryInput,
  type QueueLane,
  type QueueOverflowPolicy,
  type QueueSizes,
  type QueueTakeOutcome,
  type QueuedEntry,
} from '../admission-queue-store.js';
import {
  QUEUE_ADD,
  QUEUE_CLAIM,
  QUEUE_COUNT_AHEAD,
  QUEUE_GONE,
  QUEUE_HEADS,
  QUEUE_POSITION,
  QUEUE_REMOVE,
  QUEUE_REQUEUE_FRONT,
  QUEUE_TAKE,
  QUEUE_TAKE_EXPIRED,
} from './queue-scripts.js';
import type { RedisConnection } from './redis-client.js';

/** Most expired entries one `takeExpired` removes (bounds the script's run time; the rest go next tick). */
const EXPIRED_PER_CALL = 1000;

const EntrySchema = z.object({ lane: z.enum(['interactive', 'batch']), group: z.string(), payload: z.string(), deadline_at: z.string() });

export function parseEntry(id: string, json: string): QueuedEntry {
  const e = EntrySchema.parse(JSON.parse(json));
  return { id, lane: e.lane, group: e.group, payload: e.payload, deadlineAt: e.deadline_at === 'inf' ? Number.POSITIVE_INFINITY : Number(e.deadline_at) };
}

/** The cluster's admission queue in Redis (keys and scripts in queue-scripts.ts). */
export class RedisQueue implements AdmissionQueueStore {
  readonly #redis: RedisConnection;
  readonly #keys: readonly string[];

  constructor(
    redis: RedisConnection,
    readonly capacity: number,
    readonly policy: QueueOverflowPolicy,
  ) {
    this.#redis = redis;
    const p = redis.prefix;
    this.#keys = [`${p}q:lane:interactive`, `${p}q:lane:batch`, `${p}q:entries`, `${p}q:deadlines`];
  }

  #args(e: QueueEntryInput): (string | number)[] {
    return [this.#redis.prefix, e.id, e.lane, e.group, e.payload, e.deadlineMs === undefined ? '' : Math.max(0, Math.round(e.deadlineMs))];
  }

  async add(entry: QueueEntryInput): Promise<QueueAddOutcome> {
    const r = (await this.#redis.eval(QUEUE_ADD, this.#keys, [...this.#args(entry), this.capacity, this.policy, EVICTED_KEPT_MS])) as [string, number?, string?, string?];
    if (r[0] === 'duplicate') return { kind: 'duplicate' };
    if (r[0] === 'full') return { kind: 'full', policy: this.policy };
    const position = r[1] as number;
    const [victim, victimJson] = [r[2] ?? '', r[3] ?? ''];
    return victim === '' ? { kind: 'queued', position } : { kind: 'queued', position, evicted: parseEntry(victim, victimJson) };
  }

  async requeueFront(entry: QueueEntryInput): Promise<boolean> {
    return (await this.#redis.eval(QUEUE_REQUEUE_FRONT, this.#keys, this.#args(entry))) === 1;
  }

  async claim(groups?: readonly string[]): Promise<QueuedEntry | undefined> {
    if (groups !== undefined && groups.length === 0) return undefined;
    const r = (await this.#redis.eval(QUEUE_CLAIM, this.#keys, [this.#redis.prefix, ...(groups ?? [])])) as string[];
    return r.length === 0 ? undefined : parseEntry(r[0] as string, r[1] as string);
  }

  async take(id: string): Promise<QueueTakeOutcome> {
    const r = (await this.#redis.eval(QUEUE_TAKE, this.#keys, [this.#redis.prefix, id])) as string[];
    if (r[0] === 'taken') return { kind: 'taken', entry: parseEntry(id, r[1] as string) };
    return r[0] === 'behind' ? { kind: 'behind', first: r[1] as string } : { kind: 'absent' };
  }

  async gone(ids: readonly string[]): Promise<GoneEntry[]> {
    if (ids.length === 0) return [];
    const r = (await this.#redis.eval(QUEUE_GONE, this.#keys, [this.#redis.prefix, ...ids])) as (string | number)[];
    const out: GoneEntry[] = [];
    for (let i = 0; i + 1 < r.length; i += 2) out.push({ id: String(r[i]), evicted: r[i + 1] === 1 });
    return out;
  }

  async heads(limit: number): Promise<QueuedEntry[]> {
    const r = (await this.#redis.eval(QUEUE_HEADS, this.#keys, [this.#redis.prefix, Math.max(1, limit)])) as string[];
    const out: QueuedEntry[] = [];
    for (let i = 0; i + 1 < r.length; i += 2) out.push(parseEntry(r[i] as string, r[i + 1] as string));
    return out;
  }

  async remove(id: string): Promise<QueuedEntry | undefined> {
    const json = (await this.#redis.eval(QUEUE_REMOVE, this.#keys, [this.#redis.prefix, id])) as string | null;
    return json === null ? undefined : parseEntry(id, json);
  }

  async position(id: string): Promise<number | undefined> {
    const rank = (await this.#redis.eval(QUEUE_POSITION, this.#keys, [this.#redis.prefix, id])) as number;
    return rank < 0 ? undefined : rank;
  }

  async countAhead(group: string, lane: QueueLane): Promise<number> {
    return (await this.#redis.eval(QUEUE_COUNT_AHEAD, this.#keys, [this.#redis.prefix, group, lane])) as number;
  }

  async sizes(): Promise<QueueSizes> {
    const [interactive, batch] = await this.#redis.call((c) => Promise.all([c.zcard(this.#keys[0] as string), c.zcard(this.#keys[1] as string)]), 'queue sizes');
    return { interactive, batch };
  }

  async takeExpired(): Promise<QueuedEntry[]> {
    const r = (await this.#redis.eval(QUEUE_TAKE_EXPIRED, this.#keys, [this.#redis.prefix, EXPIRED_PER_CALL])) as string[];
    const out: { entry: QueuedEntry; score: number }[] = [];
    for (let i = 0; i + 2 < r.length; i += 3) out.push({ entry: parseEntry(r[i] as string, r[i + 1] as string), score: Number(r[i + 2]) });
    // Dispatch order: interactive lane first, then by order score.
    out.sort((a, b) => (a.entry.lane === b.entry.lane ? a.score - b.score : a.entry.lane === 'interactive' ? -1 : 1));
    return out.map((o) => o.entry);
  }
}
