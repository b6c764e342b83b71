import { readdirSync, readFileSync } from 'node:fs';

/** Resident set size of a process, bytes (`VmRSS` of /proc/<pid>/status). */
export function rssBytes(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m === null ? Number.NaN : Number(m[1]) * 1024;
}

/** Open file descriptors of a process. */
export function fdCount(pid: number): number {
  try {
    return readdirSync(`/proc/${pid}/fd`).length;
  } catch {
    return Number.NaN;
  }
}

/**
 * CPU time of a process, seconds: the time on CPU of each of its threads (`/proc/<pid>/task/<tid>/schedstat`,
 * nanoseconds), summed. utime + stime of /proc/<pid>/stat count in 10 ms ticks, too coarse for a
 * request that costs a few milliseconds; a thread that exits takes its time with it, which Node's
 * long-lived threads (libuv's pool, V8's workers) do not do.
 */
export function cpuSeconds(pid: number): number {
  let seconds = 0;
  for (const tid of readdirSync(`/proc/${pid}/task`)) seconds += threadSeconds(pid, tid) ?? 0;
  return seconds;
}

/** CPU time of each thread of a process, seconds, with its name (`comm`: Node names its main thread and workers alike) and id. */
export function threadCpu(pid: number): Array<{ tid: string; name: string; seconds: number }> {
  const out: Array<{ tid: string; name: string; seconds: number }> = [];
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    const seconds = threadSeconds(pid, tid);
    try {
      if (seconds !== undefined)
        out.push({ tid, name: readFileSync(`/proc/${pid}/task/${tid}/comm`, 'utf8').trim(), seconds });
    } catch {
      // the thread exited after its time was read
    }
  }
  return out;
}

/** A thread's time on CPU, seconds (schedstat, ns); undefined when it exited between the listing and the read. */
function threadSeconds(pid: number, tid: string): number | undefined {
  try {
    return Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0]) / 1e9;
  } catch {
    return undefined;
  }
}

/** The soft and hard open-file limits of this process (`/proc/self/limits`). */
export function nofileLimits(): { soft: number; hard: number } {
  const m = /Max open files\s+(\d+)\s+(\d+)/.exec(readFileSync('/proc/self/limits', 'utf8'));
  return m === null ? { soft: Number.NaN, hard: Number.NaN } : { soft: Number(m[1]), hard: Number(m[2]) };
}
