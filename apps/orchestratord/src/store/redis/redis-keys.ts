/** The pub/sub channel the lease and queue scripts publish on (a channel, not a key: scripts get it as an argument). */
export function signalsChannel(prefix: string): string {
  return `${prefix}signals`;
}

/** The prefix index's news (store/prefix-share.ts). */
export function prefixChannel(prefix: string): string {
  return `${prefix}prefixes`;
}

/**
 * A bounded set of records (lua/record-put.lua): one string key per entry, `<entryPrefix><id>`, with
 * its TTL; an order index (zset id → order score: the trim drops the lowest, a list walks it down);
 * an expiry index (zset id → expiry, server ms: what lets a write drop members whose TTL passed).
 */
export interface RecordSetKeys {
  readonly entryPrefix: string;
  readonly index: string;
  readonly expiry: string;
}

/**
 * Every key of the Redis store, under one prefix. What each holds is documented with the scripts
 * that write it (lua/*.lua, lua/includes/*.lua); scripts that reach keys by id build them from the
 * prefix the same way.
 */
export class RedisKeys {
  /** The admission queue's fixed keys, in the order every queue script takes them (lua/includes/queue.lua). */
  readonly queue: readonly [interactive: string, batch: string, entries: string];
  /** Sorted set of the tasks not ended, by owner lease expiry. */
  readonly taskLeases: string;
  readonly nodes: string;
  readonly nodesLive: string;
  readonly replicas: string;
  readonly recentTasks: string;
  readonly signals: string;
  /** The fleet catalog's ids (set) and names (hash: id or alias → id); each entry in `catalogModel(id)`. */
  readonly catalogIds: string;
  readonly catalogNames: string;
  /** Task records (store/task-record-store.ts), ordered by admission time. */
  readonly taskRecords: RecordSetKeys;
  /** Stored Responses (store/response-store.ts), ordered by first write. */
  readonly responses: RecordSetKeys;

  constructor(readonly prefix: string) {
    const p = prefix;
    this.queue = [`${p}q:lane:interactive`, `${p}q:lane:batch`, `${p}q:entries`];
    this.taskLeases = `${p}tasks:leases`;
    this.nodes = `${p}nodes`;
    this.nodesLive = `${p}nodes:live`;
    this.replicas = `${p}replicas`;
    this.recentTasks = `${p}act:tasks`;
    this.signals = signalsChannel(p);
    this.catalogIds = `${p}catalog:ids`;
    this.catalogNames = `${p}catalog:names`;
    this.taskRecords = { entryPrefix: `${p}taskrec:`, index: `${p}taskrecs`, expiry: `${p}taskrecs:exp` };
    this.responses = { entryPrefix: `${p}resp:`, index: `${p}resps`, expiry: `${p}resps:exp` };
  }

  /** A catalog entry's hash; the catalog scripts that reach entries by name build it the same way. */
  catalogModel(id: string): string {
    return `${this.prefix}catalog:m:${id}`;
  }

  task(id: string): string {
    return `${this.prefix}task:${id}`;
  }

  session(id: string): string {
    return `${this.prefix}session:${id}`;
  }

  /** The sorted set of a pool's slot leases (lease id → expiry, server ms); the dispatch script counts it too. */
  slotLeases(poolKey: string): string {
    return `${this.prefix}leases:${poolKey}`;
  }

  node(id: string): string {
    return `${this.prefix}node:${id}`;
  }

  replica(id: string): string {
    return `${this.prefix}replica:${id}`;
  }

  rateLimit(key: string): string {
    return `${this.prefix}rl:${key}`;
  }

  throughputBucket(bucketMs: number, startMs: number): string {
    return `${this.prefix}act:tp:${bucketMs}:${startMs}`;
  }
}
