import type { DashboardTask, ThroughputPoint } from '@llama-orch/contracts';
import type { Clock } from '@llama-orch/daemon-support';
import { mergeBucket, type ActivityStore, type ThroughputContribution, type TtftShare } from '../activity-store.js';

interface Bucket {
  tokens: number;
  ended: number;
  ttft: Map<string, TtftShare>;
  until: number;
}

/** The dashboard's activity in this process: a capped list and a map of buckets pruned on write. */
export class MemoryActivity implements ActivityStore {
  readonly #clock: Clock;
  /** Newest last. */
  #rows: DashboardTask[] = [];
  readonly #buckets = new Map<string, Bucket>();

  constructor(clock: Clock) {
    this.#clock = clock;
  }

  recordTasks(rows: readonly DashboardTask[], keep: number): Promise<void> {
    this.#rows.push(...rows);
    if (this.#rows.length > keep) this.#rows = this.#rows.slice(this.#rows.length - keep);
    return Promise.resolve();
  }

  recentTasks(limit: number): Promise<DashboardTask[]> {
    return Promise.resolve(this.#rows.slice(-limit).reverse());
  }

  addThroughput(
    replicaId: string,
    bucketMs: number,
    contributions: readonly ThroughputContribution[],
    retainMs: number,
  ): Promise<void> {
    const now = this.#clock.now();
    for (const [key, b] of this.#buckets) if (b.until <= now) this.#buckets.delete(key);
    for (const c of contributions) {
      const key = `${bucketMs}:${c.t_ms}`;
      let b = this.#buckets.get(key);
      if (b === undefined) {
        b = { tokens: 0, ended: 0, ttft: new Map(), until: 0 };
        this.#buckets.set(key, b);
      }
      b.tokens += c.tokens;
      b.ended += c.tasks_ended;
      if (c.ttft_p50_ms !== undefined && c.ttft_count > 0)
        b.ttft.set(replicaId, { p50: c.ttft_p50_ms, count: c.ttft_count });
      b.until = now + retainMs;
    }
    return Promise.resolve();
  }

  throughput(bucketMs: number, fromMs: number, toMs: number): Promise<ThroughputPoint[]> {
    const now = this.#clock.now();
    const out: ThroughputPoint[] = [];
    for (let t = fromMs; t < toMs; t += bucketMs) {
      const b = this.#buckets.get(`${bucketMs}:${t}`);
      if (b !== undefined && b.until > now) out.push(mergeBucket(t, bucketMs, b.tokens, b.ended, [...b.ttft.values()]));
    }
    return Promise.resolve(out);
  }
}
