import type {
  AdmissionQueueStore,
  GoneEntry,
  QueueAddOutcome,
  QueueEntryInput,
  QueueLane,
  QueueOverflowPolicy,
  QueueSizes,
  QueueTakeOutcome,
  QueuedEntry,
} from '../admission-queue-store.js';
import type { RedisConnection } from './redis-client.js';
import type { RedisScripts } from './redis-scripts.js';

/** Most expired entries one `takeExpired` removes (bounds the script's run time; the rest go next tick). */
const EXPIRED_PER_CALL = 1000;

/** The cluster's admission queue in Redis (keys and scripts: lua/includes/queue.lua, lua/queue-*.lua). */
export class RedisQueue implements AdmissionQueueStore {
  readonly #redis: RedisConnection;
  readonly #scripts: RedisScripts;

  constructor(
    redis: RedisConnection,
    scripts: RedisScripts,
    readonly capacity: number,
    readonly policy: QueueOverflowPolicy,
  ) {
    this.#redis = redis;
    this.#scripts = scripts;
  }

  add(entry: QueueEntryInput): Promise<QueueAddOutcome> {
    return this.#scripts.queueAdd(entry, this.capacity, this.policy);
  }

  requeueFront(entry: QueueEntryInput): Promise<boolean> {
    return this.#scripts.queueRequeueFront(entry);
  }

  async claim(groups?: readonly string[]): Promise<QueuedEntry | undefined> {
    if (groups !== undefined && groups.length === 0) return undefined;
    return this.#scripts.queueClaim(groups);
  }

  take(id: string): Promise<QueueTakeOutcome> {
    return this.#scripts.queueTake(id);
  }

  async gone(ids: readonly string[]): Promise<GoneEntry[]> {
    if (ids.length === 0) return [];
    return this.#scripts.queueGone(ids);
  }

  heads(limit: number): Promise<QueuedEntry[]> {
    return this.#scripts.queueHeads(limit);
  }

  remove(id: string): Promise<QueuedEntry | undefined> {
    return this.#scripts.queueRemove(id);
  }

  position(id: string): Promise<number | undefined> {
    return this.#scripts.queuePosition(id);
  }

  countAhead(group: string, lane: QueueLane): Promise<number> {
    return this.#scripts.queueCountAhead(group, lane);
  }

  async sizes(): Promise<QueueSizes> {
    const [interactive, batch] = this.#scripts.keys.queue;
    const [i, b] = await this.#redis.call((c) => Promise.all([c.zcard(interactive), c.zcard(batch)]), 'queue sizes');
    return { interactive: i, batch: b };
  }

  async takeExpired(): Promise<QueuedEntry[]> {
    const out = await this.#scripts.queueTakeExpired(EXPIRED_PER_CALL);
    // Dispatch order: interactive lane first, then by order score.
    out.sort((a, b) => (a.entry.lane === b.entry.lane ? a.score - b.score : a.entry.lane === 'interactive' ? -1 : 1));
    return out.map((o) => o.entry);
  }
}
