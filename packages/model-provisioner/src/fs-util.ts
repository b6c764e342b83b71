import { createHash, randomBytes } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdir, rename, rm, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import type { Hash } from 'node:crypto';
import { cacheError } from './errors.js';

/** Writes a file via a temp file in the same directory and a rename, so readers never see half of it. */
export async function writeFileAtomic(path: string, data: string | Buffer): Promise<void> {
  const tmp = `${path}.tmp-${process.pid}-${randomBytes(4).toString('hex')}`;
  try {
    await mkdir(dirname(path), { recursive: true });
    await writeFile(tmp, data);
    await rename(tmp, path);
  } catch (err) {
    await rm(tmp, { force: true });
    throw cacheError(err, path);
  }
}

/** Feeds the first `length` bytes of a file (all of it when omitted) into `hash`. */
export async function hashFileInto(
  hash: Hash,
  path: string,
  opts: { length?: number; signal?: AbortSignal } = {},
): Promise<number> {
  if (opts.length === 0) return 0;
  const stream = createReadStream(path, {
    highWaterMark: 1 << 20,
    ...(opts.length === undefined ? {} : { end: opts.length - 1 }),
    ...(opts.signal ? { signal: opts.signal } : {}),
  });
  let n = 0;
  for await (const chunk of stream) {
    hash.update(chunk as Buffer);
    n += (chunk as Buffer).length;
  }
  return n;
}

/** SHA-256 of a whole file, lowercase hex. */
export async function sha256File(path: string, signal?: AbortSignal): Promise<string> {
  const h = createHash('sha256');
  await hashFileInto(h, path, signal ? { signal } : {});
  return h.digest('hex');
}

/**
 * Delay inside an operation someone awaits (lock polling, retry backoff); rejects when the signal
 * aborts. Deliberately ref'd: an unref'd timer here let a short-lived process exit in the middle
 * of a catalog write while it waited for another process's lock.
 */
export async function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  await delay(ms, undefined, signal ? { signal } : {});
}
