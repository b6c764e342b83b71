import { setTimeout as sleep } from 'node:timers/promises';
import type { RetainedTask, TaskRecord } from './task-record.js';

/** How often {@link TaskTable.untilDrained} looks for unfinished tasks, ms. */
const DRAIN_POLL_MS = 50;

export interface TaskTableOptions {
  /** How long an ended task's frames stay readable, ms. */
  graceMs: number;
  /** Most ended tasks kept readable; the oldest go first past it. */
  maxEnded: number;
}

/**
 * Every task orchestratord knows: live ones (queued or running, full records) and ended ones
 * within their grace period. An ended task keeps only `{id, stream, state, clientKey}` — under a flood of
 * short tasks the full records (request, logger, controller) held for the grace period were most
 * of the heap. Ended tasks expire in end order from one queue (the grace is the same for all), on
 * the caller's tick: no timer per task; past `maxEnded` the oldest go at once.
 */
export class TaskTable {
  readonly #live = new Map<string, TaskRecord>();
  /** Tasks with an attempt in flight (a subset of the live ones). */
  readonly #running = new Set<TaskRecord>();
  readonly #ended = new Map<string, RetainedTask>();
  /** When each ended task expires, in end order; `#head` is the first not yet expired. */
  readonly #expiries: Array<{ readonly at: number; readonly id: string }> = [];
  #head = 0;
  readonly #graceMs: number;
  readonly #maxEnded: number;

  constructor({ graceMs, maxEnded }: TaskTableOptions) {
    this.#graceMs = graceMs;
    this.#maxEnded = maxEnded;
  }

  /** A live task, or an ended one within its grace period. */
  get(id: string): TaskRecord | RetainedTask | undefined {
    return this.#live.get(id) ?? this.#ended.get(id);
  }

  live(id: string): TaskRecord | undefined {
    return this.#live.get(id);
  }

  /** Whether the id is taken (live, or ended within its grace). */
  has(id: string): boolean {
    return this.#live.has(id) || this.#ended.has(id);
  }

  isEndedWithinGrace(id: string): boolean {
    return this.#ended.has(id);
  }

  add(task: TaskRecord): void {
    this.#live.set(task.id, task);
  }

  /** A snapshot of the live tasks (safe to end them while iterating). */
  liveTasks(): TaskRecord[] {
    return [...this.#live.values()];
  }

  running(): ReadonlySet<TaskRecord> {
    return this.#running;
  }

  startedRunning(task: TaskRecord): void {
    this.#running.add(task);
  }

  stoppedRunning(task: TaskRecord): void {
    this.#running.delete(task);
  }

  /** The task is another replica's now (handed off): reads of it here go to its owner. */
  forget(task: TaskRecord): void {
    this.#running.delete(task);
    this.#live.delete(task.id);
  }

  /** The task ended: only its frames stay, until `now + graceMs`. */
  retire(task: TaskRecord, now: number): void {
    this.#running.delete(task);
    this.#live.delete(task.id);
    this.#ended.set(task.id, { id: task.id, stream: task.stream, state: 'ended', clientKey: task.clientKey });
    this.#expiries.push({ at: now + this.#graceMs, id: task.id });
    // Expiries are in end order, as is the Map: past the cap the oldest go now.
    if (this.#ended.size > this.#maxEnded) this.expire(Number.NEGATIVE_INFINITY, this.#ended.size - this.#maxEnded);
  }

  /** Drops ended tasks whose grace is over at `now`, plus the `extra` oldest ones beyond that. */
  expire(now: number, extra = 0): void {
    const q = this.#expiries;
    let more = extra;
    while (this.#head < q.length && ((q[this.#head] as { at: number }).at <= now || more > 0)) {
      if ((q[this.#head] as { at: number }).at > now) more -= 1;
      this.#ended.delete((q[this.#head] as { id: string }).id);
      this.#head += 1;
    }
    // Compact once the expired prefix is large and most of the array.
    if (this.#head > 1024 && this.#head * 2 > q.length) {
      q.splice(0, this.#head);
      this.#head = 0;
    }
  }

  /** Forgets the ended tasks (shutdown). */
  clearEnded(): void {
    this.#ended.clear();
    this.#expiries.length = 0;
    this.#head = 0;
  }

  /**
   * Resolves true once no task here is unfinished (queued or running), false when `timeoutMs`
   * passes first. A poll: endings have many paths, and a drain is once per process.
   */
  async untilDrained(timeoutMs: number): Promise<boolean> {
    const deadline = performance.now() + timeoutMs;
    while (this.liveTasks().some((t) => t.state !== 'ended')) {
      if (performance.now() >= deadline) return false;
      await sleep(DRAIN_POLL_MS);
    }
    return true;
  }
}
