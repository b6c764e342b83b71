import type { DashboardTask } from '@llama-orch/contracts';
import type { EndedTask } from '../tasks/task-events.js';

/** The dashboard's row for an ended task. */
export function toDashboardTask(t: EndedTask): DashboardTask {
  const row: DashboardTask = {
    task_id: t.taskId,
    correlation_id: t.correlationId,
    model: t.model,
    priority: t.priority,
    tokens_out: t.tokensOut,
    duration_ms: Math.max(0, t.endedAt - t.admittedAt),
    outcome: t.outcome,
    ended_at_ms: Math.max(0, Math.round(t.endedAt)),
  };
  if (t.nodeId !== undefined) row.node_id = t.nodeId;
  if (t.poolId !== undefined) row.pool_id = t.poolId;
  if (t.ttftMs !== undefined) row.ttft_ms = t.ttftMs;
  if (t.code !== undefined) row.code = t.code;
  return row;
}

/**
 * The last `capacity` ended tasks in a fixed ring: adding one is O(1) and allocates nothing but
 * its row, whatever the task rate; {@link list} (per snapshot) copies them out newest first.
 */
export class RecentTasks {
  readonly #ring: Array<DashboardTask | undefined>;
  /** Where the next row goes. */
  #next = 0;
  #size = 0;

  constructor(readonly capacity: number) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new RangeError('capacity must be an integer >= 1');
    this.#ring = new Array<DashboardTask | undefined>(capacity).fill(undefined);
  }

  get size(): number {
    return this.#size;
  }

  add(row: DashboardTask): void {
    this.#ring[this.#next] = row;
    this.#next = (this.#next + 1) % this.capacity;
    if (this.#size < this.capacity) this.#size += 1;
  }

  /** Newest first. */
  list(): DashboardTask[] {
    const out: DashboardTask[] = [];
    for (let i = 1; i <= this.#size; i += 1) {
      const row = this.#ring[(this.#next - i + this.capacity) % this.capacity];
      if (row !== undefined) out.push(row);
    }
    return out;
  }

  /** Mean tokens of the kept tasks that produced any; undefined when none did. */
  meanTokens(): number | undefined {
    let sum = 0;
    let n = 0;
    for (const row of this.#ring) {
      if (row === undefined || row.tokens_out === 0) continue;
      sum += row.tokens_out;
      n += 1;
    }
    return n === 0 ? undefined : sum / n;
  }
}
