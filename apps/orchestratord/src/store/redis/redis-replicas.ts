import { z } from 'zod';
import type { ReplicaInfo, ReplicaMembershipStore } from '../replica-membership-store.js';
import type { RedisConnection } from './redis-client.js';
import type { RedisScripts } from './redis-scripts.js';

const ReplicaInfoSchema = z.strictObject({
  replica_id: z.string().min(1),
  address: z.string(),
  version: z.string(),
  up_since: z.number(),
  tasks_relayed: z.number().int().min(0),
  load: z.number().min(0),
});

/** Replicas announce themselves with a TTL (lua/replica-announce.lua, replica-list.lua). */
export class RedisReplicas implements ReplicaMembershipStore {
  readonly #redis: RedisConnection;
  readonly #scripts: RedisScripts;

  constructor(redis: RedisConnection, scripts: RedisScripts) {
    this.#redis = redis;
    this.#scripts = scripts;
  }

  async announce(info: ReplicaInfo, ttlMs: number): Promise<void> {
    await this.#scripts.replicaAnnounce(info, ttlMs);
  }

  async leave(replicaId: string): Promise<void> {
    const k = this.#scripts.keys;
    await this.#redis.call(
      (c) => c.multi().zrem(k.replicas, replicaId).del(k.replica(replicaId)).exec(),
      'replica leave',
    );
  }

  async list(): Promise<ReplicaInfo[]> {
    const rows = await this.#scripts.replicaList();
    return rows
      .map((r) => ReplicaInfoSchema.parse(JSON.parse(r)))
      .sort((a, b) => (a.replica_id < b.replica_id ? -1 : a.replica_id > b.replica_id ? 1 : 0));
  }
}
