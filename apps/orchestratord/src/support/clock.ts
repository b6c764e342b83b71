/** Source of "now" in milliseconds; injected so tests control time-dependent decisions. */
export interface Clock {
  now(): number;
}

export const systemClock: Clock = Object.freeze({ now: () => Date.now() });
