/** Source of "now", epoch ms; injected so tests control time-dependent decisions. */
export interface Clock {
  now(): number;
}

/** A clock that can also wait (supervision's backoff and cool-downs); parts that only read the time take {@link Clock}. */
export interface SleepingClock extends Clock {
  /** Resolves after `ms` (timer unref'd) or rejects with the signal's reason when aborted. */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

/** The real time. */
export const systemClock: SleepingClock = Object.freeze({
  now: () => Date.now(),
  sleep: (ms: number, signal?: AbortSignal) =>
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
});
