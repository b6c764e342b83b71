import type { NodeMemory, NodeRegisterRequest, NodeState, PoolSnapshot } from '@llama-orch/contracts';
import { StoreUnavailableError } from '../../errors.js';
import type { ThroughputContribution } from '../activity-store.js';
import type { CatalogModelEntry, CatalogPutOutcome, CatalogRegistration, LoadClaimOutcome } from '../catalog-store.js';
import {
  EVICTED_KEPT_MS,
  type GoneEntry,
  type QueuedEntry,
  type QueueOverflowPolicy,
} from '../admission-queue-store.js';
import type { ReplicaInfo } from '../replica-membership-store.js';
import type { SessionPoolRef } from '../session-affinity-store.js';
import type { SlotAcquireOutcome, SlotLeaseRequest } from '../slot-lease-store.js';
import type {
  AdmitOutcome,
  DispatchRoom,
  FinishOutcome,
  TakeDispatchOutcome,
  TaskAdmit,
  TaskFinish,
  TaskRequeue,
} from '../task-lifecycle-store.js';
import type { AcquireOutcome, OwnedBy, OwnedTask, TransitionOutcome } from '../task-ownership-store.js';
import { catalogEntries, catalogEntry, specJson } from './catalog-replies.js';
import type { ScriptName, ScriptSet } from './lua-script.js';
import type { RedisConnection } from './redis-client.js';
import { RedisKeys, type RecordSetKeys } from './redis-keys.js';
import {
  acquireOutcome,
  bit,
  int,
  list,
  member,
  numeric,
  one,
  parseEntry,
  records,
  refusal,
  taskHash,
  text,
  texts,
  transitionOutcome,
  unexpected,
  withEvicted,
} from './script-replies.js';

/** A session's counters as session-read answers them. */
export interface SessionRow {
  readonly turns: number;
  readonly tokensOut: number;
  readonly active: number;
  readonly pool: SessionPoolRef | undefined;
  readonly pttl: number;
}

/** The session limits the lifecycle scripts apply. `capMs`: how long a session with an active task lives. */
export interface ScriptSessionLimits {
  readonly ttlMs: number;
  readonly capMs: number;
  readonly tokenBudget: number | undefined;
}

type Arg = string | number;

/** What the facade needs of the connection (RedisConnection: EVALSHA, EVAL when the server lost the script). */
export type ScriptRunner = Pick<RedisConnection, 'prefix' | 'eval'>;

/**
 * The store's one way into its scripts: one typed method per script, which builds the keys and the
 * arguments and decodes the reply. Runs EVALSHA, EVAL when the server lost the script
 * (RedisConnection.eval); any failure, and any reply not of the shape the script's header states,
 * is a StoreUnavailableError naming the script.
 */
export class RedisScripts {
  readonly keys: RedisKeys;
  readonly #redis: ScriptRunner;
  readonly #scripts: ScriptSet;

  constructor(redis: ScriptRunner, scripts: ScriptSet) {
    this.#redis = redis;
    this.#scripts = scripts;
    this.keys = new RedisKeys(redis.prefix);
  }

  async #run<T>(
    name: ScriptName,
    keys: readonly string[],
    args: readonly Arg[],
    decode: (reply: unknown) => T,
  ): Promise<T> {
    const script = this.#scripts.get(name);
    if (script === undefined) throw new StoreUnavailableError(`cluster store script ${name} is not loaded`);
    const reply = await this.#redis.eval(script, keys, args);
    try {
      return decode(reply);
    } catch (err) {
      throw new StoreUnavailableError(
        `cluster store script ${name} answered an unexpected reply: ${(err as Error).message}`,
        { cause: err },
      );
    }
  }

  // Queue (lua/includes/queue.lua): every script takes the queue's keys and the prefix first.

  queueGone(ids: readonly string[]): Promise<GoneEntry[]> {
    return this.#run('queue-gone', this.keys.queue, [this.keys.prefix, ...ids], (r) =>
      records(r, 2).map(([id, evicted]) => ({ id: text(id), evicted: bit(evicted) })),
    );
  }

  queueRemove(id: string): Promise<QueuedEntry | undefined> {
    return this.#run('queue-remove', this.keys.queue, [this.keys.prefix, id], (r) =>
      r === null ? undefined : parseEntry(id, text(r)),
    );
  }

  // Task records (lua/includes/task-record.lua).

  taskAcquire(id: string, owner: string, ttlMs: number, record: string | undefined): Promise<AcquireOutcome> {
    return this.#run(
      'task-acquire',
      [this.keys.task(id), this.keys.taskLeases],
      [owner, ttlMs, id, record ?? ''],
      acquireOutcome,
    );
  }

  taskSeize(
    id: string,
    from: OwnedBy,
    owner: string,
    ttlMs: number,
    record: string | undefined,
  ): Promise<AcquireOutcome> {
    return this.#run(
      'task-seize',
      [this.keys.task(id), this.keys.taskLeases],
      [from.owner, from.fence, owner, ttlMs, id, record ?? ''],
      acquireOutcome,
    );
  }

  /** → the ids it could not renew. */
  taskRenewMany(tasks: readonly OwnedTask[], ttlMs: number): Promise<string[]> {
    const args: Arg[] = [ttlMs];
    for (const t of tasks) args.push(t.id, t.fence);
    return this.#run('task-renew-many', [this.keys.taskLeases, ...tasks.map((t) => this.keys.task(t.id))], args, texts);
  }

  taskLapsed(limit: number): Promise<string[]> {
    return this.#run('task-lapsed', [this.keys.taskLeases], [limit, this.keys.prefix], texts);
  }

  // Task lifecycle: queue, record and session in one script each.

  taskAdmit(
    { task, entry, sessionId, maxAhead }: TaskAdmit,
    queue: { capacity: number; policy: QueueOverflowPolicy },
    sessions: ScriptSessionLimits,
  ): Promise<AdmitOutcome> {
    const keys = [...this.keys.queue, this.keys.task(task.id), this.keys.session(sessionId), this.keys.taskLeases];
    const deadline = entry.deadlineMs === undefined ? '' : Math.max(0, Math.round(entry.deadlineMs));
    const args: Arg[] = [
      this.keys.prefix,
      task.id,
      entry.lane,
      entry.group,
      entry.payload,
      deadline,
      queue.capacity,
      queue.policy,
      EVICTED_KEPT_MS,
    ];
    args.push(task.owner, task.record, task.ttlMs, Math.max(1, Math.round(task.lifetimeMs)), sessions.capMs);
    args.push(sessions.tokenBudget ?? '', maxAhead === undefined ? '' : Math.floor(maxAhead));
    return this.#run('task-admit', keys, args, (r) => {
      const [kind, ahead, nodeId, poolId, tokensOut, position, victim, victimJson, ownerUntil] = list(r);
      const budget = sessions.tokenBudget;
      const spent = text(tokensOut) === '' ? 0 : numeric(tokensOut);
      const view = {
        ahead: int(ahead),
        lastPool: text(poolId) === '' ? undefined : { node_id: text(nodeId), pool_id: text(poolId) },
        budgetRemaining: budget === undefined ? undefined : budget - spent,
      };
      switch (member(kind, ['queued', 'exists', 'full', 'spent', 'late'])) {
        case 'queued':
          return withEvicted(
            { kind: 'queued', position: int(position), fence: 1, ownerUntil: int(ownerUntil), view },
            victim,
            victimJson,
          );
        case 'exists':
          return { kind: 'exists' };
        case 'full':
          return { kind: 'full', policy: queue.policy, view };
        case 'spent':
          return { kind: 'spent', view };
        case 'late':
          return { kind: 'late', view };
      }
    });
  }

  taskTakeDispatch(
    id: string,
    fence: number,
    placement: string,
    room: DispatchRoom | undefined,
  ): Promise<TakeDispatchOutcome> {
    const keys = [
      ...this.keys.queue,
      this.keys.task(id),
      room === undefined ? this.keys.task(id) : this.keys.slotLeases(room.poolKey),
    ];
    return this.#run('task-take-dispatch', keys, [this.keys.prefix, id, fence, placement, room?.slots ?? ''], (r) => {
      const [kind, a, b, c] = list(r);
      switch (member(kind, ['taken', 'behind', 'absent', 'refused'])) {
        case 'taken':
          return { kind: 'taken', entry: parseEntry(id, text(a)), task: taskHash(id, b) };
        case 'behind':
          return { kind: 'behind', first: text(a) };
        case 'absent':
          return { kind: 'absent' };
        case 'refused':
          return { kind: 'refused', refusal: refusal(a, b, c) };
      }
    });
  }

  taskRequeue({ id, fence, entry }: TaskRequeue): Promise<TransitionOutcome> {
    const deadline = entry.deadlineMs === undefined ? '' : Math.max(0, Math.round(entry.deadlineMs));
    const args: Arg[] = [this.keys.prefix, id, fence, entry.lane, entry.group, entry.payload, deadline];
    return this.#run('task-requeue', [...this.keys.queue, this.keys.task(id)], args, (r) => transitionOutcome(id, r));
  }

  taskFinish(f: TaskFinish, sessions: ScriptSessionLimits): Promise<FinishOutcome> {
    const s = f.session;
    const keys = [
      ...this.keys.queue,
      this.keys.task(f.id),
      s === undefined ? this.keys.task(f.id) : this.keys.session(s.id),
      this.keys.taskLeases,
    ];
    const args: Arg[] = [this.keys.prefix, f.id, f.fence, f.outcome, Math.round(f.retainMs), f.dequeue ? '1' : '0'];
    args.push(
      s === undefined ? '' : '1',
      s?.tokensOut ?? '',
      s?.pool?.node_id ?? '',
      s?.pool?.pool_id ?? '',
      sessions.ttlMs,
      sessions.capMs,
    );
    return this.#run('task-finish', keys, args, (r) => {
      const [kind, a, b, c] = list(r);
      if (kind === 'ok') return { record: { ok: true, task: taskHash(f.id, a) }, dequeued: bit(b) };
      return { record: refusal(kind, b, c), dequeued: bit(a) };
    });
  }

  /** → the seized tasks with their new fences, in dispatch order. */
  taskSeizeQueued(
    from: string,
    owner: string,
    ttlMs: number,
    limit: number,
  ): Promise<Array<{ id: string; fence: number }>> {
    const [interactive, batch, entries] = this.keys.queue;
    return this.#run(
      'task-seize-queued',
      [interactive, batch, entries, this.keys.taskLeases],
      [this.keys.prefix, from, owner, ttlMs, limit],
      (r) => records(r, 2).map(([id, fence]) => ({ id: text(id), fence: int(fence) })),
    );
  }

  // Sessions (lua/includes/session.lua).

  sessionRead(id: string): Promise<SessionRow | undefined> {
    return this.#run('session-read', [this.keys.session(id)], [], (r) => {
      const row = list(r);
      if (row.length === 0) return undefined;
      const [turns, tokensOut, active, nodeId, poolId, pttl] = row;
      return {
        turns: numeric(turns),
        tokensOut: numeric(tokensOut),
        active: numeric(active),
        pool: text(poolId) === '' ? undefined : { node_id: text(nodeId), pool_id: text(poolId) },
        pttl: int(pttl),
      };
    });
  }

  // Activity, nodes, rate limits, replicas, slot leases.

  activityAddThroughput(
    replicaId: string,
    bucketMs: number,
    contributions: readonly ThroughputContribution[],
    retainMs: number,
  ): Promise<void> {
    const keys = contributions.map((c) => this.keys.throughputBucket(bucketMs, c.t_ms));
    const args: Arg[] = [replicaId, Math.max(1, Math.round(retainMs))];
    for (const c of contributions)
      args.push(
        Math.round(c.tokens),
        c.tasks_ended,
        c.ttft_p50_ms !== undefined && c.ttft_count > 0 ? c.ttft_p50_ms : '',
        c.ttft_count,
      );
    return this.#run('activity-add-throughput', keys, args, (r) => {
      if (int(r) !== keys.length) unexpected(`${keys.length} buckets`, r);
    });
  }

  /** → the server time of the registration, ms. */
  nodeRegister(req: NodeRegisterRequest): Promise<number> {
    const k = this.keys;
    return this.#run(
      'node-register',
      [k.nodes, k.nodesLive, k.node(req.node_id)],
      [req.node_id, JSON.stringify(req), JSON.stringify(req.pools)],
      int,
    );
  }

  /** → the node's previous state, or undefined for an unknown node. */
  nodeHeartbeat(
    nodeId: string,
    pools: readonly PoolSnapshot[],
    sentAtMs: number | undefined,
    intervalMs: number,
    memory?: NodeMemory,
  ): Promise<NodeState | undefined> {
    const args = [
      nodeId,
      JSON.stringify(pools),
      sentAtMs === undefined ? '' : Math.round(sentAtMs),
      intervalMs,
      memory === undefined ? '' : JSON.stringify(memory),
    ];
    return this.#run('node-heartbeat', [this.keys.nodesLive, this.keys.node(nodeId)], args, (r) =>
      r === null ? undefined : member(r, ['registering', 'online', 'offline']),
    );
  }

  nodeDeregister(nodeId: string): Promise<boolean> {
    const k = this.keys;
    return this.#run('node-deregister', [k.nodes, k.nodesLive, k.node(nodeId)], [nodeId], bit);
  }

  /** → the ids marked offline by this call. */
  nodeSweep(intervalMs: number): Promise<string[]> {
    return this.#run('node-sweep', [this.keys.nodesLive], [this.keys.prefix, intervalMs], texts);
  }

  rateLimitHit(key: string, windowMs: number): Promise<{ count: number; resetMs: number }> {
    return this.#run('rate-limit-hit', [this.keys.rateLimit(key)], [windowMs], (r) => {
      const [count, ttl] = list(r);
      return { count: int(count), resetMs: int(ttl) };
    });
  }

  replicaAnnounce(info: ReplicaInfo, ttlMs: number): Promise<void> {
    return this.#run(
      'replica-announce',
      [this.keys.replicas, this.keys.replica(info.replica_id)],
      [info.replica_id, JSON.stringify(info), ttlMs],
      one,
    );
  }

  /** → the JSON of every live replica, in expiry order. */
  replicaList(): Promise<string[]> {
    return this.#run('replica-list', [this.keys.replicas], [this.keys.prefix], texts);
  }

  leaseAcquire({ poolKey, slots, leaseId, ttlMs }: SlotLeaseRequest): Promise<SlotAcquireOutcome> {
    return this.#run(
      'lease-acquire',
      [this.keys.slotLeases(poolKey)],
      [leaseId, slots, ttlMs, this.keys.signals, poolKey],
      (r) => {
        const [granted, expiresAt, held] = list(r);
        return bit(granted)
          ? { kind: 'granted', expiresAt: int(expiresAt), held: int(held) }
          : { kind: 'full', held: int(held) };
      },
    );
  }

  leaseRenew(poolKey: string, leaseId: string, ttlMs: number): Promise<boolean> {
    return this.#run('lease-renew', [this.keys.slotLeases(poolKey)], [leaseId, ttlMs], bit);
  }

  leaseRelease(poolKey: string, leaseId: string): Promise<boolean> {
    return this.#run('lease-release', [this.keys.slotLeases(poolKey)], [leaseId, this.keys.signals, poolKey], bit);
  }

  leaseList(poolKey: string): Promise<string[]> {
    return this.#run('lease-list', [this.keys.slotLeases(poolKey)], [], texts);
  }

  // Bounded record sets: task records, stored Responses (lua/record-*.lua).

  /**
   * Writes one entry of `set` kept `ttlMs`, ordered by `score` (undefined: the server's time of its
   * first write), and trims the set to `maxCount`. → how many entries the trim dropped and how many
   * expired index members left.
   */
  recordPut(
    set: RecordSetKeys,
    id: string,
    value: string,
    ttlMs: number,
    score: number | undefined,
    maxCount: number,
  ): Promise<{ trimmed: number; expired: number }> {
    return this.#run(
      'record-put',
      [set.entryPrefix + id, set.index, set.expiry],
      [id, value, Math.max(1, Math.round(ttlMs)), score ?? '', Math.max(1, Math.floor(maxCount)), set.entryPrefix],
      (r) => {
        const [trimmed, expired] = list(r);
        return { trimmed: int(trimmed), expired: int(expired) };
      },
    );
  }

  /** Drops from `set`'s indexes the ids whose entry is absent now. → how many left. */
  recordPrune(set: RecordSetKeys, ids: readonly string[]): Promise<number> {
    return this.#run('record-prune', [set.index, set.expiry], [set.entryPrefix, ...ids], int);
  }

  // The fleet catalog (lua/catalog-*.lua).

  catalogPut(r: CatalogRegistration): Promise<CatalogPutOutcome> {
    const k = this.keys;
    return this.#run(
      'catalog-put',
      [k.catalogIds, k.catalogNames, k.catalogModel(r.ref)],
      [r.ref, specJson(r), ...r.aliases],
      (reply) => {
        const [kind, a, b] = list(reply);
        switch (member(kind, ['conflict', 'created', 'updated'])) {
          case 'conflict':
            return { kind: 'conflict', name: text(a), owner: text(b) };
          case 'created':
          case 'updated':
            return { kind: kind as 'created' | 'updated', entry: catalogEntry(r.ref, b, int(a)) };
        }
      },
    );
  }

  /** `name` undefined: every entry (in no order). */
  catalogRead(name: string | undefined): Promise<CatalogModelEntry[]> {
    const k = this.keys;
    return this.#run('catalog-read', [k.catalogIds, k.catalogNames], [k.prefix, name ?? ''], catalogEntries);
  }

  catalogDelete(name: string): Promise<CatalogModelEntry | undefined> {
    const k = this.keys;
    return this.#run('catalog-delete', [k.catalogIds, k.catalogNames], [k.prefix, name], (r) => catalogEntries(r)[0]);
  }

  catalogClaimLoad(id: string, owner: string, ttlMs: number): Promise<LoadClaimOutcome> {
    return this.#run(
      'catalog-claim-load',
      [this.keys.catalogModel(id)],
      [owner, Math.max(1, Math.round(ttlMs))],
      (r) => {
        const [kind, a, b] = list(r);
        switch (member(kind, ['claimed', 'held', 'unknown'])) {
          case 'claimed':
            return { kind: 'claimed', until: int(a) };
          case 'held':
            return { kind: 'held', owner: text(a), until: int(b) };
          case 'unknown':
            return { kind: 'unknown' };
        }
      },
    );
  }

  catalogReleaseLoad(id: string, owner: string): Promise<boolean> {
    return this.#run('catalog-release-load', [this.keys.catalogModel(id)], [owner], bit);
  }

  catalogLoadError(id: string, error: string | undefined): Promise<boolean> {
    return this.#run(
      'catalog-load-error',
      [this.keys.catalogModel(id)],
      error === undefined ? ['0', ''] : ['1', error],
      bit,
    );
  }
}
