import { readdirSync, readFileSync, rmSync } from 'node:fs';
import { mkdir, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { z } from 'zod';

/** `<runtime_dir>/pids/<pool>-<replica>.pid`: which engine this runtime dir spawned. */
export const PidFileSchema = z.strictObject({
  pid: z.int().positive(),
  pool_id: z.string(),
  replica_id: z.string(),
  binary_path: z.string(),
  started_at: z.string(),
});
export type PidFile = z.infer<typeof PidFileSchema>;

/** Writes atomically (temp + rename). */
export async function writePidFile(dir: string, name: string, content: PidFile): Promise<string> {
  await mkdir(dir, { recursive: true });
  const path = join(dir, `${name}.pid`);
  const tmp = `${path}.${process.pid}.tmp`;
  await writeFile(tmp, `${JSON.stringify(content)}\n`);
  await rename(tmp, path);
  return path;
}

export async function removePidFile(path: string): Promise<void> {
  await rm(path, { force: true });
}

/**
 * argv of a live process (`/proc/<pid>/cmdline`), or undefined when there is none. A zombie (dead,
 * not yet reaped by init) has an empty cmdline and counts as gone.
 */
export function processCmdline(pid: number): string[] | undefined {
  try {
    const argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8')
      .split('\0')
      .filter((s) => s !== '');
    return argv.length > 0 ? argv : undefined;
  } catch {
    return undefined;
  }
}

/** Whether `pid` is alive and (after any `setpriv` exec) runs a `llama-server` binary. */
export function isLlamaServerProcess(pid: number, binaryPath?: string): boolean {
  const argv = processCmdline(pid);
  if (argv === undefined || argv.length === 0) return false;
  const exe = argv[0] ?? '';
  if (binaryPath !== undefined && exe === binaryPath) return true;
  return /(^|\/)llama-server$/.test(exe);
}

/**
 * Start-up sweep: PID files left by an earlier run of this runtime dir (crash, SIGKILL) name engines
 * that may still run. Each one that is still a llama-server is SIGKILLed; every PID file is removed.
 * Returns the pids killed.
 */
export function sweepStalePidFiles(dir: string, logger: Logger): number[] {
  let names: string[];
  try {
    names = readdirSync(dir).filter((n) => n.endsWith('.pid'));
  } catch {
    return [];
  }
  const killed: number[] = [];
  for (const name of names) {
    const path = join(dir, name);
    let entry: PidFile | undefined;
    try {
      entry = PidFileSchema.parse(JSON.parse(readFileSync(path, 'utf8')));
    } catch (err) {
      logger.warn({ err, path }, 'unreadable stale pid file removed');
    }
    if (entry !== undefined && isLlamaServerProcess(entry.pid, entry.binary_path)) {
      try {
        process.kill(entry.pid, 'SIGKILL');
        killed.push(entry.pid);
        logger.warn({ pid: entry.pid, pool_id: entry.pool_id }, 'killed orphan llama-server from a previous run');
      } catch (err) {
        logger.warn({ err, pid: entry.pid }, 'could not kill orphan llama-server');
      }
    }
    rmSync(path, { force: true });
  }
  return killed;
}
