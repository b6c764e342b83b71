import {
  ClusterStoreSettingsSchema,
  type ClusterStore,
  type ClusterStoreDeps,
  type ClusterStoreSettingsInput,
} from './cluster-store.js';
import { openLocalStore } from './memory/memory-store.js';

/**
 * Builds the store from the settings: the shared Redis store when `redis_url` is set (ioredis is
 * loaded only then), else the in-process one (`LocalStore`: the parts one process uses, its catalog
 * kept in `state_dir` when set). Settings are validated here too (a caller that skipped loadConfig
 * gets the same errors). Rejects with StoreUnavailableError when Redis cannot be reached at start.
 */
export async function createClusterStore(
  settings: ClusterStoreSettingsInput,
  deps: ClusterStoreDeps,
): Promise<ClusterStore> {
  const s = ClusterStoreSettingsSchema.parse(settings);
  if (s.redis_url === undefined) return openLocalStore(s, deps);
  const { createRedisStore } = await import('./redis/redis-store.js');
  return createRedisStore({ ...s, redis_url: s.redis_url }, deps);
}
