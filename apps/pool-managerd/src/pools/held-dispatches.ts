import { DispatchNotHeldError } from '../errors.js';
import type { PoolManagerMetrics } from '../support/metrics.js';
import type { DispatchLogger } from './dispatch.js';
import { HeldDispatch } from './held-dispatch.js';

/**
 * The re-attachable dispatches this daemon holds, by task id (both listeners share it through the
 * PoolManager). A dispatch without `reattach_ms` never has an entry.
 */
export class HeldDispatches {
  readonly #held = new Map<string, HeldDispatch>();
  readonly #metrics: PoolManagerMetrics;

  constructor(metrics: PoolManagerMetrics) {
    this.#metrics = metrics;
  }

  /** Held dispatches right now (attached or within their window). */
  get size(): number {
    return this.#held.size;
  }

  /**
   * Opens a re-attachable dispatch of `taskId` on `poolId`: `open` gets the signal to run it with
   * and may throw (refusals: nothing is held then). A dispatch of the same task still held (the
   * orchestrator dispatched the task again) is cancelled: only the newest one can be re-attached.
   */
  hold<T>(
    poolId: string,
    taskId: string,
    reattachMs: number,
    log: DispatchLogger,
    open: (signal: AbortSignal) => T,
  ): { held: HeldDispatch; run: T } {
    const held = new HeldDispatch({
      poolId,
      taskId,
      reattachMs,
      log,
      metrics: this.#metrics,
      forget: (d) => {
        if (this.#held.get(d.taskId) === d) this.#held.delete(d.taskId);
      },
    });
    const run = open(held.signal);
    const earlier = this.#held.get(taskId);
    if (earlier !== undefined) {
      log.warn({ pool_id: poolId, task_id: taskId }, 'a held dispatch of the same task was replaced and cancelled');
      earlier.replaced();
    }
    this.#held.set(taskId, held);
    return { held, run };
  }

  /** The re-attachable dispatch of `taskId` on `poolId`; {@link DispatchNotHeldError} (404) when there is none. */
  find(poolId: string, taskId: string): HeldDispatch {
    const held = this.#held.get(taskId);
    if (held === undefined || held.poolId !== poolId || !held.reattachable)
      throw new DispatchNotHeldError(poolId, taskId);
    return held;
  }

  /** DELETE: cancels the held dispatch; {@link DispatchNotHeldError} when there is none. */
  cancel(poolId: string, taskId: string): void {
    const held = this.#held.get(taskId);
    if (held === undefined || held.poolId !== poolId) throw new DispatchNotHeldError(poolId, taskId);
    held.cancel();
  }

  /** Daemon close: window timers cleared, entries dropped. */
  close(): void {
    for (const held of [...this.#held.values()]) held.drop();
  }
}
