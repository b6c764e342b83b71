import { createHash } from 'node:crypto';
import { lstat, readFile, rename, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { z } from 'zod';
import { Sha256Schema } from '@llama-orch/contracts';
import { cacheError } from './errors.js';
import { writeFileAtomic } from './fs-util.js';

/** What a ref resolved to last time (`refs/<key>.json`). */
export const RefRecordSchema = z.strictObject({
  /** Canonical ref. */
  ref: z.string(),
  sha256: Sha256Schema,
  size_bytes: z.int().nonnegative(),
  /** For `file:` refs: the file's identity when it was hashed, so an unchanged file is not re-hashed. */
  file: z.strictObject({ path: z.string(), size: z.number(), mtime_ms: z.number() }).optional(),
  updated_at: z.string(),
});
export type RefRecord = z.infer<typeof RefRecordSchema>;

/**
 * Content-addressed model store under `<cacheDir>/models`:
 * `sha256/<digest>.gguf` (immutable blobs), `refs/<key>.json` (ref → digest),
 * `tmp/` (partial downloads and generator output), `locks/`. Every file name is a hex digest,
 * so nothing from a ref or an id ever becomes a path component.
 */
export class ModelStore {
  readonly blobDir: string;
  readonly refDir: string;
  readonly tmpDir: string;
  readonly lockDir: string;

  constructor(
    readonly root: string,
    private readonly log: Logger,
  ) {
    this.blobDir = join(root, 'sha256');
    this.refDir = join(root, 'refs');
    this.tmpDir = join(root, 'tmp');
    this.lockDir = join(root, 'locks');
  }

  /** Hex key of a canonical ref; the only name derived from a ref. */
  static keyOf(canonical: string): string {
    return createHash('sha256').update(canonical).digest('hex');
  }

  blobPath(digest: string): string {
    return join(this.blobDir, `${Sha256Schema.parse(digest)}.gguf`);
  }

  partialPath(key: string): string {
    return join(this.tmpDir, `${key}.partial`);
  }

  /**
   * Size of a stored blob, or undefined when it is absent. Only a regular file counts: blobs are
   * trusted by name (they only ever arrive by rename after verification), so a symlink planted
   * under a digest (pointing out of the cache, at content with another digest) must not be served.
   */
  async blobSize(digest: string): Promise<number | undefined> {
    return lstat(this.blobPath(digest)).then(
      (s) => (s.isFile() ? s.size : undefined),
      () => undefined,
    );
  }

  async readRef(key: string): Promise<RefRecord | undefined> {
    let text: string;
    try {
      text = await readFile(join(this.refDir, `${key}.json`), 'utf8');
    } catch {
      return undefined;
    }
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      json = undefined;
    }
    const parsed = RefRecordSchema.safeParse(json);
    if (!parsed.success) {
      this.log.warn({ key }, 'ignoring malformed ref record');
      return undefined;
    }
    return parsed.data;
  }

  async writeRef(key: string, rec: RefRecord): Promise<void> {
    await writeFileAtomic(join(this.refDir, `${key}.json`), `${JSON.stringify(RefRecordSchema.parse(rec), null, 2)}\n`);
  }

  /** Moves a verified temp file into the store under its digest (a no-op when the blob exists). */
  async commit(tmpPath: string, digest: string): Promise<string> {
    const dest = this.blobPath(digest);
    try {
      await rename(tmpPath, dest);
    } catch (err) {
      await rm(tmpPath, { force: true });
      throw cacheError(err, dest);
    }
    return dest;
  }
}
