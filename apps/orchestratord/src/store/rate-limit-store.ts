/**
 * Per-key request limits counted once for the cluster: a fixed window per key (the window starts
 * with the key's first request and lasts `windowMs`, store clock). A key limited to 60 per minute
 * gets 60 across any number of replicas, not 60 per replica.
 */
export interface RateLimitHit {
  /** Requests counted in the current window, this one included (past `limit` = refused). */
  readonly count: number;
  readonly allowed: boolean;
  /** Time left in the window, ms. */
  readonly resetMs: number;
}

export interface RateLimitStore {
  /** Counts one request of `key` against `limit` per `windowMs`. */
  hit(key: string, limit: number, windowMs: number): Promise<RateLimitHit>;
}
