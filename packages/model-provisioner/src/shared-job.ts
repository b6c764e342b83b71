import { ModelProvisionError } from './errors.js';

interface Job<T, P> {
  controller: AbortController;
  waiters: number;
  promise: Promise<T>;
  listeners: Set<(p: P) => void>;
}

/**
 * In-process de-duplication: callers asking for the same key share one run. The run is aborted
 * only when every caller waiting on it has aborted; a caller that aborts while others still
 * wait leaves at once with `DEADLINE_EXCEEDED`, and the last one leaves after the run has
 * cleaned up.
 */
export class SharedJobs<T, P> {
  private readonly jobs = new Map<string, Job<T, P>>();

  get size(): number {
    return this.jobs.size;
  }

  /** Aborts every run and waits until all have settled (for `close()`). */
  async abortAll(reason: unknown): Promise<void> {
    const jobs = [...this.jobs.values()];
    this.jobs.clear();
    for (const j of jobs) j.controller.abort(reason);
    await Promise.allSettled(jobs.map((j) => j.promise));
  }

  run(
    key: string,
    fn: (signal: AbortSignal, listeners: ReadonlySet<(p: P) => void>) => Promise<T>,
    caller: { signal?: AbortSignal | undefined; onProgress?: ((p: P) => void) | undefined; what: string },
  ): Promise<T> {
    let job = this.jobs.get(key);
    if (!job) {
      const controller = new AbortController();
      const listeners = new Set<(p: P) => void>();
      const created: Job<T, P> = { controller, waiters: 0, listeners, promise: Promise.resolve() as Promise<T> };
      created.promise = fn(controller.signal, listeners).finally(() => {
        if (this.jobs.get(key) === created) this.jobs.delete(key);
      });
      // a run nobody waits for any more must not surface as an unhandled rejection
      created.promise.catch(() => undefined);
      this.jobs.set(key, created);
      job = created;
    }
    const j = job;
    j.waiters++;
    const listener = caller.onProgress;
    if (listener) j.listeners.add(listener);
    const { signal } = caller;

    return new Promise<T>((resolve, reject) => {
      let settled = false;
      const leave = (): boolean => {
        if (settled) return false;
        settled = true;
        j.waiters--;
        if (listener) j.listeners.delete(listener);
        signal?.removeEventListener('abort', onAbort);
        return true;
      };
      const deadline = (cause: unknown): ModelProvisionError =>
        cause instanceof ModelProvisionError && cause.code === 'DEADLINE_EXCEEDED'
          ? cause
          : new ModelProvisionError(
              'DEADLINE_EXCEEDED',
              `${caller.what}: aborted before the model was ready`,
              {},
              { cause },
            );
      const onAbort = (): void => {
        if (!leave()) return;
        if (j.waiters > 0) {
          reject(deadline(signal?.reason));
          return;
        }
        if (this.jobs.get(key) === j) this.jobs.delete(key);
        j.controller.abort(signal?.reason);
        j.promise.then(
          () => reject(deadline(signal?.reason)),
          (err: unknown) => reject(deadline(err)),
        );
      };
      if (signal?.aborted) {
        onAbort();
        return;
      }
      signal?.addEventListener('abort', onAbort, { once: true });
      j.promise.then(
        (v) => {
          if (leave()) resolve(v);
        },
        (err: unknown) => {
          if (leave()) reject(err);
        },
      );
    });
  }
}
