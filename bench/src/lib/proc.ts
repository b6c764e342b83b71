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

/** CPU time (user + system) of a process, seconds. */
export function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // fields[11] = utime, fields[12] = stime (after pid and comm), in clock ticks (100 Hz on Linux).
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/** The soft and hard open-file limits of this process (`/proc/self/limits`). */
export function nofileLimits(): { soft: number; hard: number } {
  const m = /Max open files\s+(\d+)\s+(\d+)/.exec(readFileSync('/proc/self/limits', 'utf8'));
  return m === null ? { soft: Number.NaN, hard: Number.NaN } : { soft: Number(m[1]), hard: Number(m[2]) };
}
