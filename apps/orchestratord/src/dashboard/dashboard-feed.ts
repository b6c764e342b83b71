import { TASK_LIMITS, type DashboardSnapshot } from '@llama-orch/contracts';
import { toClusterPool } from '../registry/cluster-pool.js';
import type { NodeRegistry } from '../registry/node-registry.js';
import type { Clock } from '@llama-orch/daemon-support';
import type { TaskEvent } from '../tasks/task-events.js';
import type { TaskService } from '../tasks/task-service.js';
import { RecentTasks, toDashboardTask } from './recent-tasks.js';
import { ThroughputSeries } from './throughput-series.js';

export interface DashboardFeedOptions {
  registry: NodeRegistry;
  /** What the feed reads tasks from: events, the cumulative token count and the queue's load. */
  tasks: Pick<TaskService, 'subscribe' | 'tokensRelayed' | 'load'>;
  clock: Clock;
  /** orchestratord's version, as snapshots show it. */
  version: string;
  /** Width of a throughput bucket, ms. @default 5000 */
  bucketMs?: number;
  /** Throughput buckets kept. @default 120 (10 minutes of 5 s buckets) */
  buckets?: number;
  /** Ended tasks kept for the "recent tasks" list. @default 50 */
  recentTasks?: number;
  /** Least time between two notifications, ms (changes in between are coalesced into the next). @default 250 */
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
 * when someone listens (or asks).
 */
export class DashboardFeed {
  readonly #registry: NodeRegistry;
  readonly #tasks: DashboardFeedOptions['tasks'];
  readonly #clock: Clock;
  readonly #version: string;
  readonly #minIntervalMs: number;
  readonly #series: ThroughputSeries;
  readonly #recent: RecentTasks;
  readonly #listeners = new Set<DashboardListener>();
  readonly #unsubscribe: Array<() => void>;
  #state: DashboardFeedState = 'running';
  #closed: Promise<void> | undefined;
  /** The pending coalesced notification. */
  #pending: NodeJS.Timeout | undefined;
  #lastNotifyAt = Number.NEGATIVE_INFINITY;
  /** Fires at the end of the throughput bucket in progress. */
  #bucketTimer: NodeJS.Timeout | undefined;
  readonly #tokens = (): number => this.#tasks.tokensRelayed();

  constructor(o: DashboardFeedOptions) {
    this.#registry = o.registry;
    this.#tasks = o.tasks;
    this.#clock = o.clock;
    this.#version = o.version;
    this.#minIntervalMs = o.minIntervalMs ?? 250;
    this.#recent = new RecentTasks(o.recentTasks ?? 50);
    this.#series = new ThroughputSeries({ bucketMs: o.bucketMs ?? 5000, buckets: o.buckets ?? 120, now: o.clock.now(), tokens: o.tasks.tokensRelayed() });
    this.#unsubscribe = [o.registry.subscribe(() => this.#changed()), o.tasks.subscribe((e) => this.#onTask(e))];
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
    return () => {
      this.#listeners.delete(listener);
    };
  }

  /** The cluster now, as the dashboard shows it. */
  snapshot(): DashboardSnapshot {
    const now = this.#clock.now();
    this.#series.advance(now, this.#tokens);
    const load = this.#tasks.load(Math.round(this.#recent.meanTokens() ?? TASK_LIMITS.defaultMaxTokens));
    return {
      version: this.#version,
      generated_at_ms: Math.max(0, Math.round(now)),
      bucket_ms: this.#series.bucketMs,
      nodes: this.#registry.list(),
      pools: this.#registry.pools().map(toClusterPool),
      queue: { depth: load.depth, capacity: load.capacity, running: load.running, predicted_wait_ms: load.predictedWaitMs },
      throughput: this.#series.points(),
      recent_tasks: this.#recent.list(),
    };
  }

  /** Idempotent (the same promise); never waits. */
  close(): Promise<void> {
    if (this.#closed !== undefined) return this.#closed;
    this.#state = 'closed';
    for (const off of this.#unsubscribe) off();
    clearTimeout(this.#pending);
    clearTimeout(this.#bucketTimer);
    this.#pending = undefined;
    this.#bucketTimer = undefined;
    this.#listeners.clear();
    this.#closed = Promise.resolve();
    return this.#closed;
  }

  #onTask(e: TaskEvent): void {
    if (e.type === 'first-token') {
      this.#series.advance(e.at, this.#tokens);
      this.#series.firstToken(e.ttftMs);
    } else if (e.type === 'ended') {
      this.#series.advance(e.task.endedAt, this.#tokens);
      this.#series.taskEnded();
      this.#recent.add(toDashboardTask(e.task));
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
    this.#lastNotifyAt = this.#clock.now();
    const snap = this.snapshot();
    for (const l of this.#listeners) l(snap);
  }

  /** One timer at a time, re-armed for the next bucket's end; the bucket closes (and listeners hear) then. */
  #armBucketTimer(): void {
    const wait = Math.max(1, this.#series.openUntil - this.#clock.now());
    this.#bucketTimer = setTimeout(() => {
      this.#bucketTimer = undefined;
      if (this.#state !== 'running') return;
      if (this.#series.advance(this.#clock.now(), this.#tokens)) this.#changed();
      this.#armBucketTimer();
    }, wait);
    this.#bucketTimer.unref();
  }
}
