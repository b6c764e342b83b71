import type { DashboardTask, ThroughputPoint } from '@llama-orch/contracts';
import type { Log } from '@llama-orch/daemon-support';
import type { ActivityStore, ThroughputContribution } from '../store/activity-store.js';

export interface ClusterActivityOptions {
  store: ActivityStore;
  /** This replica's id: its share of each bucket is kept under it. */
  replicaId: string;
  /** Width of a throughput bucket, ms. */
  bucketMs: number;
  /** Buckets shown (and kept in the store, plus two). */
  buckets: number;
  /** Ended tasks kept in the cluster's list. */
  recentTasks: number;
  /** Delay before ended tasks are written (coalesces a burst into one write), ms. */
  flushDelayMs: number;
  logger: Log;
}

/** What the dashboard shows of the whole cluster's activity. */
export interface ActivityView {
  readonly recent: DashboardTask[];
  readonly throughput: ThroughputPoint[];
}

/**
 * This replica's side of the cluster's dashboard activity: it buffers ended tasks and closed
 * throughput buckets and writes them in batches (ended tasks `flushDelayMs` after the first of a
 * burst, buckets as they close — never a write per token), and reads the whole cluster's back.
 * A failed write is logged once per outage and kept for the next one (at most one list's and one
 * series' worth: older rows would be trimmed anyway). A write that timed out may still have landed,
 * so its retry can count a bucket's share twice: dashboard figures, not accounting.
 */
export class ClusterActivity {
  readonly #o: ClusterActivityOptions;
  #rows: DashboardTask[] = [];
  #buckets: ThroughputContribution[] = [];
  #timer: NodeJS.Timeout | undefined;
  #flushing: Promise<void> = Promise.resolve();
  #outage = false;
  #closed = false;

  constructor(o: ClusterActivityOptions) {
    this.#o = o;
  }

  /** An ended task, written within `flushDelayMs`. */
  addTask(row: DashboardTask): void {
    if (this.#closed) return;
    this.#rows.push(row);
    if (this.#rows.length > this.#o.recentTasks) this.#rows.splice(0, this.#rows.length - this.#o.recentTasks);
    this.#schedule();
  }

  /** This replica's closed buckets, written with the next flush. */
  addBuckets(contributions: readonly ThroughputContribution[]): void {
    if (this.#closed || contributions.length === 0) return;
    this.#buckets.push(...contributions);
    if (this.#buckets.length > this.#o.buckets) this.#buckets.splice(0, this.#buckets.length - this.#o.buckets);
    this.#schedule();
  }

  /** Writes what is buffered (one flush at a time, in order). Never rejects. */
  flush(): Promise<void> {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#flushing = this.#flushing.then(() => this.#write());
    return this.#flushing;
  }

  /**
   * Flushes, then reads the cluster's recent tasks and the buckets before `openSince` (the bucket in
   * progress is left out). Buckets nobody wrote are zero from the oldest written one (or
   * `shownSince`, when earlier) on. Rejects (StoreUnavailableError) when the store does.
   */
  async read(openSince: number, shownSince: number): Promise<ActivityView> {
    await this.flush();
    const { store, bucketMs, buckets, recentTasks } = this.#o;
    const oldest = openSince - buckets * bucketMs;
    const [recent, stored] = await Promise.all([
      store.recentTasks(recentTasks),
      store.throughput(bucketMs, oldest, openSince),
    ]);
    const from = Math.max(oldest, Math.min(stored[0]?.t_ms ?? Number.POSITIVE_INFINITY, shownSince));
    const throughput: ThroughputPoint[] = [];
    let i = 0;
    for (let t = from; t < openSince; t += bucketMs) {
      const point = stored[i];
      if (point !== undefined && point.t_ms === t) {
        throughput.push(point);
        i += 1;
      } else throughput.push({ t_ms: t, tokens_per_s: 0, tasks_ended: 0 });
    }
    return { recent, throughput };
  }

  /** A last flush (bounded by the store's command timeout); idempotent. */
  async close(): Promise<void> {
    if (this.#closed) return this.#flushing;
    await this.flush();
    this.#closed = true;
  }

  #schedule(): void {
    if (this.#timer !== undefined) return;
    this.#timer = setTimeout(() => void this.flush(), this.#o.flushDelayMs);
    this.#timer.unref();
  }

  async #write(): Promise<void> {
    const rows = this.#rows;
    const buckets = this.#buckets;
    this.#rows = [];
    this.#buckets = [];
    const { store, replicaId, bucketMs, buckets: shown, recentTasks } = this.#o;
    // Apart, so that one that landed is not written again with the other's retry.
    const rowsOk = await this.#try(rows.length === 0 || store.recordTasks(rows, recentTasks));
    const bucketsOk = await this.#try(
      buckets.length === 0 || store.addThroughput(replicaId, bucketMs, buckets, (shown + 2) * bucketMs),
    );
    if (!rowsOk) this.#rows = [...rows, ...this.#rows].slice(-recentTasks);
    if (!bucketsOk) this.#buckets = [...buckets, ...this.#buckets].slice(-shown);
  }

  async #try(write: true | Promise<void>): Promise<boolean> {
    if (write === true) return true;
    try {
      await write;
      if (this.#outage) this.#o.logger.info({}, 'dashboard activity written to the cluster store again');
      this.#outage = false;
      return true;
    } catch (err) {
      if (!this.#outage)
        this.#o.logger.warn({ err }, 'dashboard activity not written to the cluster store; kept for the next try');
      this.#outage = true;
      return false;
    }
  }
}
