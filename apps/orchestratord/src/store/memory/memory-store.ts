import { join } from 'node:path';
import { LocalPrefixShare } from '../prefix-share.js';
import type { ClusterStoreDeps, ClusterStoreSettings, LocalStore } from '../cluster-store.js';
import { MemoryActivity } from './memory-activity.js';
import { MemoryCatalog } from './memory-catalog.js';
import { MemoryRateLimits } from './memory-rate-limits.js';
import { MemoryReplicas } from './memory-replicas.js';

/** The in-process catalog's state file in `state_dir` (the name it had when it held interest only). */
export const CATALOG_STATE_FILE = 'catalog-interest.json';

/**
 * The in-process store: the parts one process uses (rate limits, its replica entry, the dashboard's
 * activity, the catalog); no timers, no connections. `catalog` defaults to one without a state file;
 * close() waits for the catalog's write in progress.
 */
export function createLocalStore({
  clock,
  catalog = MemoryCatalog.inMemory(clock),
}: Pick<ClusterStoreDeps, 'clock'> & { catalog?: MemoryCatalog }): LocalStore {
  return {
    kind: 'memory',
    shared: false,
    rateLimits: new MemoryRateLimits(clock),
    replicas: new MemoryReplicas(clock),
    activity: new MemoryActivity(clock),
    catalog,
    prefixes: new LocalPrefixShare(),
    health: () => Promise.resolve({ ok: true, kind: 'memory', latency_ms: 0 }),
    close: () => catalog.close(),
  };
}

/** The in-process store with its catalog read from (and kept in) `state_dir` when set. */
export async function openLocalStore(
  settings: Pick<ClusterStoreSettings, 'state_dir'>,
  { clock, logger }: ClusterStoreDeps,
): Promise<LocalStore> {
  const catalog = await MemoryCatalog.open({
    clock,
    file: settings.state_dir === undefined ? undefined : join(settings.state_dir, CATALOG_STATE_FILE),
    logger: logger.child({ subsystem: 'catalog' }),
  });
  return createLocalStore({ clock, catalog });
}
