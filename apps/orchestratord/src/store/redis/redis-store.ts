import type { ClusterStore, ClusterStoreDeps, ClusterStoreSettings } from '../cluster-store.js';
import { RedisActivity } from './redis-activity.js';
import { RedisConnection } from './redis-client.js';
import { RedisLifecycle } from './redis-lifecycle.js';
import { RedisNodes } from './redis-nodes.js';
import { RedisQueue } from './redis-queue.js';
import { RedisRateLimits } from './redis-rate-limits.js';
import { RedisReplicas } from './redis-replicas.js';
import { RedisSessions } from './redis-sessions.js';
import { RedisSignals } from './redis-signals.js';
import { RedisSlotLeases } from './redis-slot-leases.js';
import { RedisTasks } from './redis-tasks.js';

/** The Redis store set: one connection shared by every part. */
export async function createRedisStore(s: ClusterStoreSettings & { redis_url: string }, { logger }: ClusterStoreDeps): Promise<ClusterStore> {
  const redis = await RedisConnection.open({ url: s.redis_url, prefix: s.redis_prefix, commandTimeoutMs: s.command_timeout_ms, logger });
  const signals = new RedisSignals(redis, logger);
  const sessionLimits = { ttlMs: s.session_ttl_ms, maxSessions: s.session_max, tokenBudget: s.session_token_budget };
  let closing: Promise<void> | undefined;
  return {
    kind: 'redis',
    nodes: new RedisNodes(redis, s.heartbeat_interval_ms),
    leases: new RedisSlotLeases(redis),
    queue: new RedisQueue(redis, s.admission_capacity, s.admission_policy),
    tasks: new RedisTasks(redis),
    sessions: new RedisSessions(redis, sessionLimits),
    lifecycle: new RedisLifecycle(redis, { capacity: s.admission_capacity, policy: s.admission_policy }, sessionLimits),
    rateLimits: new RedisRateLimits(redis),
    replicas: new RedisReplicas(redis),
    signals,
    activity: new RedisActivity(redis),
    health: async () => {
      try {
        return { ok: true, kind: 'redis', latency_ms: await redis.ping() };
      } catch (err) {
        return { ok: false, kind: 'redis', error: (err as Error).message };
      }
    },
    close: () => {
      closing ??= signals.close().then(() => redis.close());
      return closing;
    },
  };
}
