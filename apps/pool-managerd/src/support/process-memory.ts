import { readFileSync } from 'node:fs';

/** Reads a process's resident memory, bytes; undefined when it cannot be read (gone, not Linux). */
export type ResidentBytes = (pid: number) => number | undefined;

/**
 * Resident set size of `pid` (`VmRSS` of `/proc/<pid>/status`: anonymous memory plus the mapped
 * file pages it touched, which for llama.cpp includes the model it maps), bytes. One small read of
 * a kernel-generated file: cheap enough to take whenever a pool's status is read, so the figure is
 * never stale.
 */
export const procResidentBytes: ResidentBytes = (pid) => {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/status`, 'latin1');
  } catch {
    // The engine exited between its unbind and this read, or there is no procfs: no reading.
    return undefined;
  }
  const kb = /^VmRSS:\s+(\d+) kB$/m.exec(text)?.[1];
  return kb === undefined ? undefined : Number(kb) * 1024;
};
