import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import lockfile from 'proper-lockfile';
import type { Logger } from 'pino';
import { cacheError } from './errors.js';
import { sleep } from './fs-util.js';

export interface LockOptions {
  logger: Logger;
  signal?: AbortSignal;
  /** A lock not refreshed for this long is taken over (its holder died). @default 30000 */
  staleMs?: number;
  /** Delay between tries while another holder has it. @default 100 */
  pollMs?: number;
}

/**
 * Cross-process lock `<dir>/<name>.lock` (proper-lockfile: an mkdir that the holder refreshes).
 * Waits as long as the holder keeps it fresh, so a slow download elsewhere is waited for,
 * and stops waiting when `signal` aborts.
 */
export async function acquireLock(dir: string, name: string, opts: LockOptions): Promise<() => Promise<void>> {
  await mkdir(dir, { recursive: true }).catch((err: unknown) => {
    throw cacheError(err, dir);
  });
  // proper-lockfile books held locks by their target path, so each lock needs its own target
  // (one shared target with several lockfilePaths makes one release free another lock)
  const target = join(dir, name);
  const lockfilePath = `${target}.lock`;
  const staleMs = opts.staleMs ?? 30_000;
  for (;;) {
    opts.signal?.throwIfAborted();
    try {
      return await lockfile.lock(target, {
        realpath: false,
        stale: staleMs,
        update: Math.max(1000, Math.floor(staleMs / 3)),
        retries: 0,
        // the default throws from a timer and takes the process down; a lost lock only risks a
        // duplicate download, which the content-addressed rename tolerates
        onCompromised: (err) => opts.logger.error({ err, lock: lockfilePath }, 'cache lock compromised'),
      });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ELOCKED') throw cacheError(err, lockfilePath);
    }
    await sleep(opts.pollMs ?? 100, opts.signal);
  }
}
