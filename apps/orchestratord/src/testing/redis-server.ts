// Test-only: the real redis-server helper lives in daemon-support (the replicas benchmark uses it too).
export {
  ensureRedisServer,
  startRedisServer,
  DEBIAN_REDIS_SERVER,
  REDIS_INSTALL_TIMEOUT_MS,
} from '@llama-orch/daemon-support/redis-server';
export type { EnsureRedisServerOptions, RedisServerHandle } from '@llama-orch/daemon-support/redis-server';
