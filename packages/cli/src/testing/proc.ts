import { existsSync, readFileSync, readdirSync } from 'node:fs';

// Test support: the process tree of a test's children, read from /proc (Linux).

/** Child pids of `pid` (every thread's children). */
export function childrenOf(pid: number): number[] {
  const dir = `/proc/${pid}/task`;
  if (!existsSync(dir)) return [];
  return readdirSync(dir).flatMap((t) => {
    try {
      return readFileSync(`${dir}/${t}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
    } catch {
      return [];
    }
  });
}

/** Every descendant of `pid`. */
export function descendants(pid: number): number[] {
  const kids = childrenOf(pid);
  return [...kids, ...kids.flatMap(descendants)];
}

export function cmdline(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ');
  } catch {
    return '';
  }
}

/** Running = exists and is not a zombie (a dead child nobody reaped yet is gone for our purpose). */
export function running(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return false;
  }
}
