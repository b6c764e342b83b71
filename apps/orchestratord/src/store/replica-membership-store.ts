/**
 * The orchestratord replicas of the cluster, for the dashboard's "replicas" section. Each replica
 * announces itself and re-announces with its load; one that stops announcing for `ttlMs` (store
 * clock) is gone from the list.
 */
export interface ReplicaInfo {
  readonly replica_id: string;
  /** Where the replica listens (its public base URL). */
  readonly address: string;
  readonly version: string;
  /** When it started, ms since the epoch. */
  readonly up_since: number;
  /** Tasks it relayed since it started. */
  readonly tasks_relayed: number;
  /** Streams it relays now. */
  readonly load: number;
}

export interface ReplicaMembershipStore {
  /** Adds or refreshes the replica; it stays listed for `ttlMs` without another call. */
  announce(info: ReplicaInfo, ttlMs: number): Promise<void>;
  /** Removes it at once (clean shutdown). */
  leave(replicaId: string): Promise<void>;
  /** Live replicas, sorted by id. */
  list(): Promise<ReplicaInfo[]>;
}
