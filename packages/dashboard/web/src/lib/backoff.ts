/** Reconnect delays of the event stream. */
export interface BackoffPolicy {
  /** First delay, ms. @default 500 */
  initialMs: number;
  /** Largest delay, ms. @default 15000 */
  maxMs: number;
  /** ± fraction of random spread, so many tabs of a restarted orchestratord do not reconnect in step. @default 0.2 */
  jitter: number;
}

export const DEFAULT_BACKOFF: BackoffPolicy = { initialMs: 500, maxMs: 15_000, jitter: 0.2 };

/** Delay before reconnect attempt `attempt` (1 = the first retry): doubling from `initialMs`, capped, jittered. */
export function backoffDelay(
  attempt: number,
  policy: BackoffPolicy = DEFAULT_BACKOFF,
  random: () => number = Math.random,
): number {
  const base = Math.min(policy.maxMs, policy.initialMs * 2 ** Math.max(0, attempt - 1));
  return Math.round(base * (1 + policy.jitter * (2 * random() - 1)));
}
