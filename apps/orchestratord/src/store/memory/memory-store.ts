import { join } from 'node:path';
import { LocalPrefixShare } from '../prefix-share.js';
import type { ClusterStoreDeps, ClusterStoreSettings, LocalStore } from '../cluster-store.js';
import type { RecordRetention } from '../task-record-store.js';
import { MemoryActivity } from './memory-activity.js';
import { MemoryCatalog } from './memory-catalog.js';
import { MemoryRateLimits } from './memory-rate-limits.js';
import { MemoryReplicas } from './memory-replicas.js';
import { MemoryResponses } from './memory-responses.js';
import { MemoryTaskRecords } from './memory-task-records.js';

/** The in-process catalog's state file in `state_dir` (the name it had when it held interest only). */
export const CATALOG_STATE_FILE = 'catalog-interest.json';

/** The records kept when the caller names no retention (the default of `task_retention_count`). */
export const DEFAULT_RECORD_RETENTION: RecordRetention = { maxCount: 10_000 };

/**
 * The in-process store: the parts one process uses (rate limits, its replica entry, the dashboard's
 * activity, the catalog, the task records and stored Responses); no timers, no connections.
 * `catalog` defaults to one without a state file, `retention` to {@link DEFAULT_RECORD_RETENTION};
 * close() waits for the catalog's write in progress.
 */
export function createLocalStore({
  clock,
  catalog = MemoryCatalog.inMemory(clock),
  retention = DEFAULT_RECORD_RETENTION,
}: Pick<ClusterStoreDeps, 'clock'> & { catalog?: MemoryCatalog; retention?: RecordRetention }): LocalStore {
  return {
    kind: 'memory',
    shared: false,
    rateLimits: new MemoryRateLimits(clock),
    replicas: new MemoryReplicas(clock),
    activity: new MemoryActivity(clock),
    catalog,
    prefixes: new LocalPrefixShare(),
    taskRecords: new MemoryTaskRecords(clock, retention),
    responses: new MemoryResponses(clock, retention),
    health: () => Promise.resolve({ ok: true, kind: 'memory', latency_ms: 0 }),
    close: () => catalog.close(),
  };
}

/**
 * The in-process store with its catalog read from (and kept in) `state_dir` when set; records kept
 * up to `task_retention_count` (absent: {@link DEFAULT_RECORD_RETENTION}).
 */
export async function openLocalStore(
  settings: Pick<ClusterStoreSettings, 'state_dir'> & Partial<Pick<ClusterStoreSettings, 'task_retention_count'>>,
  { clock, logger }: ClusterStoreDeps,
): Promise<LocalStore> {
  const catalog = await MemoryCatalog.open({
    clock,
    file: settings.state_dir === undefined ? undefined : join(settings.state_dir, CATALOG_STATE_FILE),
    logger: logger.child({ subsystem: 'catalog' }),
  });
  const maxCount = settings.task_retention_count;
  return createLocalStore({ clock, catalog, retention: maxCount === undefined ? undefined : { maxCount } });
}
