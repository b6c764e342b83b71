import { TASK_LIMITS, type DashboardReplica, type DashboardSnapshot } from '@llama-orch/contracts';
import type { ModelLoads } from '../catalog/model-loads.js';
import { toClusterPool } from '../registry/cluster-pool.js';
import type { NodeRegistry } from '../registry/node-registry.js';
import type { Clock, Log } from '@llama-orch/daemon-support';
import type { ActivityStore } from '../store/activity-store.js';
import type { AdmissionQueueStore } from '../store/admission-queue-store.js';
import type { ReplicaInfo } from '../store/replica-membership-store.js';
import type { TaskEvent } from '../tasks/task-events.js';
import type { TaskService } from '../tasks/task-service.js';
import { ClusterActivity } from './cluster-activity.js';
import { RecentModelEvents } from './model-feed.js';
import { meanTokens, toDashboardTask } from './recent-tasks.js';
import { ThroughputSeries } from './throughput-series.js';

export interface DashboardFeedOptions {
  registry: NodeRegistry;
  /** What the feed reads tasks from: events, the cumulative token count and the queue's load. */
  tasks: Pick<TaskService, 'subscribe' | 'tokensRelayed' | 'load'>;
  /**
   * Loads and unloads of catalog models this replica starts, follows or asks for (the live feed's
   * `model_events`). Absent = none listed.
   */
  models?: Pick<ModelLoads, 'subscribe'>;
  clock: Clock;
  /** orchestratord's version, as snapshots show it. */
  version: string;
  /** Where recent tasks and throughput of the whole cluster are kept (the cluster store's). */
  activity: ActivityStore;
  /** This replica's id (its share of the throughput buckets). */
  replicaId: string;
  /** The live replicas, as last read (ReplicaDirectory.live). */
  replicas: () => readonly ReplicaInfo[];
  logger: Log;
  /**
   * While someone listens, a snapshot at least this often, ms: what other replicas did reaches this
   * one's pages only through the store, which sends no events. Absent = only on changes here (the
   * in-process store has no other writer).
   */
  pollMs?: number;
  /**
   * The cluster's admission queue, when replicas share one (Redis): the snapshot's depth comes from
   * it, the capacity is the cluster's, and `running` is the sum of the streams the live replicas
   * announced. Absent = this process's queue and running tasks.
   */
  sharedQueue?: Pick<AdmissionQueueStore, 'sizes'> & { readonly capacity: number };
  /** Width of a throughput bucket, ms. @default 5000 */
  bucketMs?: number;
  /** Throughput buckets kept. @default 120 (10 minutes of 5 s buckets) */
  buckets?: number;
  /** Ended tasks kept for the "recent tasks" list. @default 50 */
  recentTasks?: number;
  /** Model events kept for the live feed. @default 50 */
  modelEvents?: number;
  /** Least time between two notifications, ms (changes in between are coalesced into the next); also the delay before ended tasks are written to the store. @default 250 */
  minIntervalMs?: number;
}

export type DashboardListener = (snapshot: DashboardSnapshot) => void;

/**
 * `running` → `closed` (close(): timers cleared, sources unsubscribed, listeners dropped;
 * idempotent, never waits).
 */
export type DashboardFeedState = 'running' | 'closed';

/**
 * Everything the web dashboard shows, kept live from the registry's events and the task service's
 * (per task, never per token), and pushed: listeners get a fresh {@link DashboardSnapshot} after
 * something changed — coalesced, trailing, at most one per `minIntervalMs` — and at each
 * throughput bucket's end, so charts move while nothing else happens. Snapshots are built only
 * when someone listens (or asks). Nodes and pools come from the registry (the cluster's, with a
 * shared store); recent tasks and throughput from the {@link ActivityStore}, to which this replica
 * adds its ended tasks and closed buckets ({@link ClusterActivity}), so every replica shows the same.
 */
export class DashboardFeed {
  readonly #registry: NodeRegistry;
  readonly #tasks: DashboardFeedOptions['tasks'];
  readonly #clock: Clock;
  readonly #version: string;
  readonly #minIntervalMs: number;
  readonly #series: ThroughputSeries;
  readonly #activity: ClusterActivity;
  readonly #replicas: () => readonly ReplicaInfo[];
  readonly #modelEvents: RecentModelEvents;
  readonly #logger: Log;
  readonly #pollMs: number | undefined;
  readonly #sharedQueue: DashboardFeedOptions['sharedQueue'];
  /** The first bucket this feed saw: the chart starts there (or at the oldest bucket any replica wrote). */
  readonly #shownSince: number;
  readonly #listeners = new Set<DashboardListener>();
  readonly #unsubscribe: Array<() => void>;
  #state: DashboardFeedState = 'running';
  #closed: Promise<void> | undefined;
  /** The pending coalesced notification. */
  #pending: NodeJS.Timeout | undefined;
  #lastNotifyAt = Number.NEGATIVE_INFINITY;
  /** Fires at the end of the throughput bucket in progress. */
  #bucketTimer: NodeJS.Timeout | undefined;
  #pollTimer: NodeJS.Timeout | undefined;
  /** A notification is being built (snapshots read the store): the next waits for it. */
  #notifying = false;
  #notifyAgain = false;
  /** A snapshot failure is being reported, so a store outage is logged once. */
  #failing = false;
  readonly #tokens = (): number => this.#tasks.tokensRelayed();

  constructor(o: DashboardFeedOptions) {
    this.#registry = o.registry;
    this.#tasks = o.tasks;
    this.#clock = o.clock;
    this.#version = o.version;
    this.#minIntervalMs = o.minIntervalMs ?? 250;
    this.#replicas = o.replicas;
    this.#logger = o.logger;
    this.#pollMs = o.pollMs;
    this.#sharedQueue = o.sharedQueue;
    const bucketMs = o.bucketMs ?? 5000;
    const buckets = o.buckets ?? 120;
    this.#series = new ThroughputSeries({ bucketMs, buckets, now: o.clock.now(), tokens: o.tasks.tokensRelayed() });
    this.#shownSince = this.#series.openSince;
    this.#activity = new ClusterActivity({
      store: o.activity,
      replicaId: o.replicaId,
      bucketMs,
      buckets,
      recentTasks: o.recentTasks ?? 50,
      flushDelayMs: this.#minIntervalMs,
      logger: o.logger,
    });
    this.#modelEvents = new RecentModelEvents(o.modelEvents ?? 50);
    this.#unsubscribe = [o.registry.subscribe(() => this.#changed()), o.tasks.subscribe((e) => this.#onTask(e))];
    if (o.models !== undefined)
      this.#unsubscribe.push(
        o.models.subscribe((e) => {
          this.#modelEvents.add(e);
          this.#changed();
        }),
      );
    this.#armBucketTimer();
  }

  get state(): DashboardFeedState {
    return this.#state;
  }

  /** Width of a throughput bucket, ms. */
  get bucketMs(): number {
    return this.#series.bucketMs;
  }

  /** Calls `listener` with a new snapshot after each (coalesced) change. Returns the unsubscribe function. */
  subscribe(listener: DashboardListener): () => void {
    if (this.#state === 'closed') return () => undefined;
    this.#listeners.add(listener);
    this.#armPoll();
    return () => {
      this.#listeners.delete(listener);
    };
  }

  /** The cluster now, as the dashboard shows it. Rejects (StoreUnavailableError) when the cluster store does. */
  async snapshot(): Promise<DashboardSnapshot> {
    this.#advance(this.#clock.now());
    const [view, clusterDepth] = await Promise.all([
      this.#activity.read(this.#series.openSince, this.#shownSince),
      this.#sharedQueue?.sizes(),
    ]);
    const now = this.#clock.now();
    const load = this.#tasks.load(Math.round(meanTokens(view.recent) ?? TASK_LIMITS.defaultMaxTokens));
    const replicas = this.#replicas();
    // A shared queue: its depth from the store, running = the streams every replica announced relaying.
    const depth =
      clusterDepth !== undefined ? { interactive: clusterDepth.interactive, batch: clusterDepth.batch } : load.depth;
    const running =
      clusterDepth !== undefined && replicas.length > 0
        ? replicas.reduce((n, r) => n + Math.max(0, Math.round(r.load)), 0)
        : load.running;
    return {
      version: this.#version,
      generated_at_ms: Math.max(0, Math.round(now)),
      bucket_ms: this.#series.bucketMs,
      nodes: this.#registry.list(),
      pools: this.#registry.pools().map(toClusterPool),
      queue: {
        depth,
        capacity: this.#sharedQueue?.capacity ?? load.capacity,
        running,
        predicted_wait_ms: load.predictedWaitMs,
      },
      throughput: view.throughput,
      recent_tasks: view.recent,
      replicas: replicas.map(toDashboardReplica),
      model_events: this.#modelEvents.list(),
    };
  }

  /** Idempotent (the same promise); waits only for the last write of buffered activity (bounded by the store's command timeout). */
  close(): Promise<void> {
    if (this.#closed !== undefined) return this.#closed;
    this.#state = 'closed';
    for (const off of this.#unsubscribe) off();
    clearTimeout(this.#pending);
    clearTimeout(this.#bucketTimer);
    clearTimeout(this.#pollTimer);
    this.#pending = undefined;
    this.#bucketTimer = undefined;
    this.#pollTimer = undefined;
    this.#listeners.clear();
    this.#closed = this.#activity.close();
    return this.#closed;
  }

  /** Closes the buckets that ended by `now` and hands this replica's share to the store's writer. */
  #advance(now: number): boolean {
    const closed = this.#series.advance(now, this.#tokens);
    if (closed) this.#activity.addBuckets(this.#series.drain());
    return closed;
  }

  #onTask(e: TaskEvent): void {
    if (e.type === 'first-token') {
      this.#advance(e.at);
      this.#series.firstToken(e.ttftMs);
    } else if (e.type === 'ended') {
      this.#advance(e.task.endedAt);
      this.#series.taskEnded();
      this.#activity.addTask(toDashboardTask(e.task));
    }
    this.#changed();
  }

  /** Schedules one notification at the end of the current window (trailing): a burst of changes makes one snapshot. */
  #changed(): void {
    if (this.#state !== 'running' || this.#pending !== undefined || this.#listeners.size === 0) return;
    const wait = Math.max(0, this.#lastNotifyAt + this.#minIntervalMs - this.#clock.now());
    this.#pending = setTimeout(() => {
      this.#pending = undefined;
      this.#notify();
    }, wait);
    this.#pending.unref();
  }

  #notify(): void {
    if (this.#state !== 'running' || this.#listeners.size === 0) return;
    if (this.#notifying) {
      this.#notifyAgain = true;
      return;
    }
    this.#notifying = true;
    this.#lastNotifyAt = this.#clock.now();
    void this.snapshot()
      .then(
        (snap) => {
          if (this.#failing) this.#logger.info({}, 'dashboard snapshots read the cluster store again');
          this.#failing = false;
          if (this.#state !== 'running') return;
          for (const l of this.#listeners) l(snap);
        },
        (err: unknown) => {
          // The pages keep their last snapshot (and show its age); the next change or bucket end tries again.
          if (!this.#failing) this.#logger.warn({ err }, 'dashboard snapshot failed: cluster store unreachable');
          this.#failing = true;
        },
      )
      .finally(() => {
        this.#notifying = false;
        if (this.#notifyAgain) {
          this.#notifyAgain = false;
          this.#changed();
        }
      });
  }

  /** While someone listens and `pollMs` is set: a notification every `pollMs` (other replicas' activity). */
  #armPoll(): void {
    if (this.#pollMs === undefined || this.#pollTimer !== undefined || this.#state !== 'running') return;
    this.#pollTimer = setTimeout(() => {
      this.#pollTimer = undefined;
      if (this.#state !== 'running' || this.#listeners.size === 0) return;
      this.#changed();
      this.#armPoll();
    }, this.#pollMs);
    this.#pollTimer.unref();
  }

  /** One timer at a time, re-armed for the next bucket's end; the bucket closes (and listeners hear) then. */
  #armBucketTimer(): void {
    const wait = Math.max(1, this.#series.openUntil - this.#clock.now());
    this.#bucketTimer = setTimeout(() => {
      this.#bucketTimer = undefined;
      if (this.#state !== 'running') return;
      if (this.#advance(this.#clock.now())) this.#changed();
      this.#armBucketTimer();
    }, wait);
    this.#bucketTimer.unref();
  }
}

function toDashboardReplica(r: ReplicaInfo): DashboardReplica {
  return {
    replica_id: r.replica_id,
    address: r.address,
    version: r.version,
    up_since_ms: Math.max(0, Math.round(r.up_since)),
    tasks_relayed: Math.max(0, Math.round(r.tasks_relayed)),
    load: Math.max(0, Math.round(r.load)),
  };
}
