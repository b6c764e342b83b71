import type { ClusterStoreDeps, ClusterStoreSettings, SharedStore } from '../cluster-store.js';
import { loadScripts } from './lua-script.js';
import { RedisActivity } from './redis-activity.js';
import { RedisCatalog } from './redis-catalog.js';
import { RedisConnection } from './redis-client.js';
import { RedisLifecycle } from './redis-lifecycle.js';
import { RedisNodes } from './redis-nodes.js';
import { RedisQueue } from './redis-queue.js';
import { RedisRateLimits } from './redis-rate-limits.js';
import { RedisReplicas } from './redis-replicas.js';
import { RedisResponses } from './redis-responses.js';
import { RedisScripts } from './redis-scripts.js';
import { RedisSessions } from './redis-sessions.js';
import { RedisPrefixShare } from './redis-prefix-share.js';
import { RedisSignals } from './redis-signals.js';
import { RedisSlotLeases } from './redis-slot-leases.js';
import { RedisTaskRecords } from './redis-task-records.js';
import { RedisTasks } from './redis-tasks.js';

/**
 * The Redis store, every part shared by the replicas on one Redis and prefix: one connection and
 * one script facade serve every part. The scripts are read (lua/) before connecting, so a broken
 * installation fails without touching Redis.
 */
export async function createRedisStore(
  s: ClusterStoreSettings & { redis_url: string },
  { logger }: ClusterStoreDeps,
): Promise<SharedStore> {
  const loaded = loadScripts();
  const redis = await RedisConnection.open({
    url: s.redis_url,
    prefix: s.redis_prefix,
    commandTimeoutMs: s.command_timeout_ms,
    logger,
  });
  const scripts = new RedisScripts(redis, loaded);
  const signals = new RedisSignals(redis, logger);
  const prefixes = new RedisPrefixShare(redis, logger);
  const sessionLimits = { ttlMs: s.session_ttl_ms, maxSessions: s.session_max, tokenBudget: s.session_token_budget };
  const retention = { maxCount: s.task_retention_count };
  let closing: Promise<void> | undefined;
  return {
    kind: 'redis',
    shared: true,
    nodes: new RedisNodes(redis, scripts, s.heartbeat_interval_ms),
    leases: new RedisSlotLeases(scripts),
    queue: new RedisQueue(redis, scripts),
    tasks: new RedisTasks(redis, scripts),
    sessions: new RedisSessions(redis, scripts, sessionLimits),
    lifecycle: new RedisLifecycle(
      scripts,
      { capacity: s.admission_capacity, policy: s.admission_policy },
      sessionLimits,
    ),
    rateLimits: new RedisRateLimits(scripts),
    replicas: new RedisReplicas(redis, scripts),
    signals,
    activity: new RedisActivity(redis, scripts),
    catalog: new RedisCatalog(scripts),
    prefixes,
    taskRecords: new RedisTaskRecords(redis, scripts, retention),
    responses: new RedisResponses(redis, scripts, retention),
    health: async () => {
      try {
        return { ok: true, kind: 'redis', latency_ms: await redis.ping() };
      } catch (err) {
        return { ok: false, kind: 'redis', error: (err as Error).message };
      }
    },
    close: () => {
      closing ??= Promise.all([signals.close(), prefixes.close()]).then(() => redis.close());
      return closing;
    },
  };
}
