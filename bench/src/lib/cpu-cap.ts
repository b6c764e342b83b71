import { existsSync, readFileSync } from 'node:fs';
import { mkdir, readFile, rmdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { UsageError } from '../errors.js';

/**
 * A CPU cap on a set of processes: a cgroup of its own with a CFS quota (cgroup v2 `cpu.max`, or
 * cgroup v1 `cpu.cfs_quota_us` where the cpu controller is mounted v1, as on this VM). A process
 * under the cap gets at most `cores` × each 100 ms period, whatever else runs: on a machine with
 * fewer cores than processes to pin, this is the one way to give each replica "one core's worth"
 * and leave the FIXTURE nodes and the load generator outside it. Needs root (or a delegated cgroup).
 */
export interface CpuCap {
  readonly name: string;
  readonly cores: number;
  readonly mechanism: string;
  /** Moves a process (all its threads) under the cap. */
  add(pid: number): Promise<void>;
  /** The cgroup's CFS counters: periods, periods throttled, time throttled (s). */
  stats(): Promise<{ periods: number; throttled: number; throttled_s: number }>;
  /** Removes the cgroup (its processes must have exited or been moved out). Idempotent. */
  remove(): Promise<void>;
}

const PERIOD_US = 100_000;
const V2_ROOT = '/sys/fs/cgroup';
const V1_CPU = '/sys/fs/cgroup/cpu';

type Hierarchy = { kind: 'v2'; root: string } | { kind: 'v1'; root: string };

function read(path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return '';
  }
}

/** Where a cap can be made here, or why not. */
export function cpuCapHierarchy(): Hierarchy | { reason: string } {
  if (process.getuid?.() !== 0) return { reason: 'a CPU cap needs a cgroup of its own; run the benchmark as root' };
  if (read(join(V2_ROOT, 'cgroup.subtree_control')).split(/\s+/).includes('cpu')) return { kind: 'v2', root: V2_ROOT };
  if (existsSync(join(V1_CPU, 'cpu.cfs_quota_us'))) return { kind: 'v1', root: V1_CPU };
  return {
    reason: `neither a cgroup v2 root with the cpu controller enabled (${V2_ROOT}/cgroup.subtree_control) nor a cgroup v1 cpu mount (${V1_CPU})`,
  };
}

/** `cpu.stat` of either cgroup version. */
export function parseCpuStat(text: string): { periods: number; throttled: number; throttled_s: number } {
  const field = (k: string): number => Number(new RegExp(`^${k} (\\d+)`, 'm').exec(text)?.[1] ?? Number.NaN);
  // v1 counts throttled_time in ns, v2 throttled_usec in µs.
  const throttledS = Number.isFinite(field('throttled_usec'))
    ? field('throttled_usec') / 1e6
    : field('throttled_time') / 1e9;
  return { periods: field('nr_periods'), throttled: field('nr_throttled'), throttled_s: throttledS };
}

/** Makes cgroup `<root>/<name>` with a quota of `cores` CPUs. Throws a UsageError where no cap can be made. */
export async function createCpuCap(name: string, cores: number): Promise<CpuCap> {
  const h = cpuCapHierarchy();
  if ('reason' in h) throw new UsageError(`cannot cap the replicas' CPU: ${h.reason}`);
  const dir = join(h.root, name);
  await mkdir(dir, { recursive: true });
  const quota = Math.round(cores * PERIOD_US);
  if (h.kind === 'v2') {
    await writeFile(join(dir, 'cpu.max'), `${quota} ${PERIOD_US}`);
  } else {
    await writeFile(join(dir, 'cpu.cfs_period_us'), String(PERIOD_US));
    await writeFile(join(dir, 'cpu.cfs_quota_us'), String(quota));
  }
  let removed = false;
  return {
    name,
    cores,
    mechanism:
      h.kind === 'v2'
        ? `cgroup v2 cpu.max "${quota} ${PERIOD_US}"`
        : `cgroup v1 cpu.cfs_quota_us ${quota} / cpu.cfs_period_us ${PERIOD_US}`,
    add: (pid) => writeFile(join(dir, 'cgroup.procs'), String(pid)),
    stats: async () => parseCpuStat(await readFile(join(dir, 'cpu.stat'), 'utf8')),
    remove: async () => {
      if (removed) return;
      removed = true;
      // Anything still inside goes back to the root first: a cgroup with members cannot be removed.
      for (const pid of read(join(dir, 'cgroup.procs'))
        .split('\n')
        .filter((p) => p !== '')) {
        await writeFile(join(h.root, 'cgroup.procs'), pid).catch(() => undefined);
      }
      await rmdir(dir).catch(() => undefined);
    },
  };
}
