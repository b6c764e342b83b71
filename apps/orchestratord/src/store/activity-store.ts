import type { DashboardTask, ThroughputPoint } from '@llama-orch/contracts';

/**
 * One replica's share of one closed throughput bucket, written once when the bucket closes (never
 * per token): the tokens it relayed and the tasks it ended in the bucket, and the median of its
 * first-token times there with how many it saw.
 */
export interface ThroughputContribution {
  /** Bucket start, ms since the epoch (a multiple of the bucket width). */
  readonly t_ms: number;
  readonly tokens: number;
  readonly tasks_ended: number;
  /** Median first-token time of the replica's tasks in the bucket, ms; absent when `ttft_count` is 0. */
  readonly ttft_p50_ms?: number;
  readonly ttft_count: number;
}

/**
 * The dashboard's cluster-wide activity: the last ended tasks of every replica and the throughput
 * buckets they all add to, so every replica's dashboard shows the same "recent tasks" and chart.
 * Writes are batched by the caller (rows as tasks end, buckets as they close); nothing here is per
 * token. Everything expires: the list is capped and refreshed with a TTL, buckets live `retainMs`.
 */
export interface ActivityStore {
  /** Adds ended tasks (oldest first) in front of the list, keeping the newest `keep`. */
  recordTasks(rows: readonly DashboardTask[], keep: number): Promise<void>;
  /** The newest `limit` ended tasks of the cluster, newest first. */
  recentTasks(limit: number): Promise<DashboardTask[]>;
  /** Adds one replica's contributions to buckets of width `bucketMs`; each bucket is kept `retainMs` after its last write. */
  addThroughput(
    replicaId: string,
    bucketMs: number,
    contributions: readonly ThroughputContribution[],
    retainMs: number,
  ): Promise<void>;
  /** The buckets of width `bucketMs` starting in [`fromMs`, `toMs`) that any replica wrote, oldest first, merged over replicas. */
  throughput(bucketMs: number, fromMs: number, toMs: number): Promise<ThroughputPoint[]>;
}

/** How long the recent-tasks list outlives its last write. */
export const RECENT_TASKS_TTL_MS = 24 * 60 * 60 * 1000;

/** One replica's first-token median in a bucket, and its weight. */
export interface TtftShare {
  readonly p50: number;
  readonly count: number;
}

/**
 * The bucket's point out of every replica's share. The first-token median of the cluster is the
 * count-weighted median of the replicas' medians: exact with one replica, an approximation with
 * several (each replica keeps only its own median, so nothing per task crosses the store).
 */
export function mergeBucket(
  t_ms: number,
  bucketMs: number,
  tokens: number,
  tasksEnded: number,
  ttfts: readonly TtftShare[],
): ThroughputPoint {
  const point: ThroughputPoint = {
    t_ms,
    tokens_per_s: (Math.max(0, tokens) * 1000) / bucketMs,
    tasks_ended: Math.max(0, tasksEnded),
  };
  const p50 = weightedMedian(ttfts);
  if (p50 !== undefined) point.ttft_p50_ms = p50;
  return point;
}

export function weightedMedian(shares: readonly TtftShare[]): number | undefined {
  const live = shares.filter((s) => s.count > 0).sort((a, b) => a.p50 - b.p50);
  const total = live.reduce((n, s) => n + s.count, 0);
  if (total === 0) return undefined;
  let seen = 0;
  for (const s of live) {
    seen += s.count;
    if (seen * 2 >= total) return s.p50;
  }
  return live[live.length - 1]?.p50;
}
