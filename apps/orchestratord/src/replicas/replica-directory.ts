import type { Clock } from '@llama-orch/daemon-support';
import type { ReplicaInfo } from '../store/replica-membership-store.js';

export interface ReplicaDirectoryOptions {
  /** This replica's id. */
  selfId: string;
  clock: Clock;
  /** How long a list read from the store is trusted, ms (the membership TTL: an entry older than that may be gone). */
  maxAgeMs: number;
}

/**
 * The live replicas as last read from the store (refreshed with each announcement, so readers never
 * wait on the store): for the dashboard, the metrics leader and the address of another replica.
 * A list older than `maxAgeMs` (the store unreachable for a while) is not trusted: {@link live}
 * answers empty, {@link addressOf} undefined and {@link isLeader} false, so a replica cut off from
 * the store never keeps exporting cluster gauges beside the leader the others elected.
 */
export class ReplicaDirectory {
  readonly selfId: string;
  readonly #clock: Clock;
  readonly #maxAgeMs: number;
  #replicas: readonly ReplicaInfo[] = [];
  #readAt = Number.NEGATIVE_INFINITY;

  constructor(o: ReplicaDirectoryOptions) {
    this.selfId = o.selfId;
    this.#clock = o.clock;
    this.#maxAgeMs = o.maxAgeMs;
  }

  /** A list just read from the store (sorted by id). */
  update(replicas: readonly ReplicaInfo[]): void {
    this.#replicas = replicas;
    this.#readAt = this.#clock.now();
  }

  /** Whether the last list is recent enough to trust. */
  get fresh(): boolean {
    return this.#clock.now() - this.#readAt <= this.#maxAgeMs;
  }

  /** Live replicas by id; empty when the last list is stale. */
  live(): readonly ReplicaInfo[] {
    return this.fresh ? this.#replicas : [];
  }

  /** Base URL of a live replica, for reaching it directly. */
  addressOf(replicaId: string): string | undefined {
    return this.live().find((r) => r.replica_id === replicaId)?.address;
  }

  /** The lowest live replica id: the one that exports the cluster gauges. */
  leaderId(): string | undefined {
    return this.live()[0]?.replica_id;
  }

  isLeader(): boolean {
    return this.leaderId() === this.selfId;
  }
}
