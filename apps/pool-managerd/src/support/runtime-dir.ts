import { mkdirSync, readFileSync, rmSync, writeFileSync, renameSync } from 'node:fs';
import { join } from 'node:path';
import { RuntimeDirLockedError } from '../errors.js';
import { processCmdline } from './pid-files.js';

/** Layout of `<runtime_dir>`: handoff files, engine PID files, engine logs, the daemon's own lock. */
export interface RuntimeDir {
  root: string;
  /** `<root>/engines`: handoff files (watched). */
  engines: string;
  /** `<root>/pids`: one PID file per spawned engine. */
  pids: string;
  /** `<root>/logs`: rotating engine logs. */
  logs: string;
  /** `<root>/pool-managerd.pid`: the daemon that owns the dir. */
  lockFile: string;
}

export function runtimeDir(root: string): RuntimeDir {
  return {
    root,
    engines: join(root, 'engines'),
    pids: join(root, 'pids'),
    logs: join(root, 'logs'),
    lockFile: join(root, 'pool-managerd.pid'),
  };
}

/**
 * Creates the dirs and claims the dir for this process. Two daemons on one runtime dir would kill
 * each other's engines in the stale-PID sweep, so a live owner (a `node` process with that pid)
 * makes this throw {@link RuntimeDirLockedError}. Returns the release function.
 */
export function claimRuntimeDir(dir: RuntimeDir, pid: number = process.pid): () => void {
  for (const d of [dir.root, dir.engines, dir.pids, dir.logs]) mkdirSync(d, { recursive: true });
  let owner: number | undefined;
  try {
    owner = Number.parseInt(readFileSync(dir.lockFile, 'utf8').trim(), 10);
  } catch {
    owner = undefined;
  }
  if (owner !== undefined && Number.isInteger(owner) && owner !== pid) {
    const argv = processCmdline(owner);
    if (argv !== undefined && argv.some((a) => /(^|\/)node$/.test(a) || a.includes('pool-managerd'))) {
      throw new RuntimeDirLockedError(dir.root, owner);
    }
  }
  const tmp = `${dir.lockFile}.${pid}.tmp`;
  writeFileSync(tmp, `${pid}\n`);
  renameSync(tmp, dir.lockFile);
  let released = false;
  return () => {
    if (released) return;
    released = true;
    try {
      if (readFileSync(dir.lockFile, 'utf8').trim() === String(pid)) rmSync(dir.lockFile, { force: true });
    } catch {
      // Already gone: nothing to release.
    }
  };
}
