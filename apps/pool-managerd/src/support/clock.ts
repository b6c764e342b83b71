/**
 * The one time source of pool-managerd (supervision, breaker, restart limiter, pool state
 * timestamps), injectable so tests run in milliseconds. Parts that only read the time take
 * `Pick<Clock, 'now'>`.
 */
export interface Clock {
  /** Epoch ms. */
  now(): number;
  /** Resolves after `ms` (timer unref'd) or rejects with the signal's reason when aborted. */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

export const systemClock: Clock = {
  now: () => Date.now(),
  sleep: (ms, signal) =>
    new Promise<void>((resolve, reject) => {
      if (signal?.aborted === true) {
        reject(signal.reason);
        return;
      }
      const onAbort = (): void => {
        clearTimeout(timer);
        reject(signal?.reason);
      };
      const timer = setTimeout(() => {
        signal?.removeEventListener('abort', onAbort);
        resolve();
      }, ms);
      timer.unref();
      signal?.addEventListener('abort', onAbort, { once: true });
    }),
};
