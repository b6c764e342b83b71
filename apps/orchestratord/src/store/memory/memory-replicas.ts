import type { Clock } from '@llama-orch/daemon-support';
import type { ReplicaInfo, ReplicaMembershipStore } from '../replica-membership-store.js';

/** Replica membership in this process: the one replica, listed while it keeps announcing. */
export class MemoryReplicas implements ReplicaMembershipStore {
  readonly #replicas = new Map<string, { info: ReplicaInfo; until: number }>();
  readonly #clock: Clock;

  constructor(clock: Clock) {
    this.#clock = clock;
  }

  announce(info: ReplicaInfo, ttlMs: number): Promise<void> {
    this.#replicas.set(info.replica_id, { info: { ...info }, until: this.#clock.now() + ttlMs });
    return Promise.resolve();
  }

  leave(replicaId: string): Promise<void> {
    this.#replicas.delete(replicaId);
    return Promise.resolve();
  }

  list(): Promise<ReplicaInfo[]> {
    const now = this.#clock.now();
    for (const [id, r] of this.#replicas) if (r.until <= now) this.#replicas.delete(id);
    return Promise.resolve(
      [...this.#replicas.values()]
        .map((r) => r.info)
        .sort((a, b) => (a.replica_id < b.replica_id ? -1 : a.replica_id > b.replica_id ? 1 : 0)),
    );
  }
}
