import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { z } from 'zod';
import { Sha256Schema, type CatalogRegisterRequest } from '@llama-orch/contracts';
import { InternalError } from '../errors.js';
import type { Log } from '@llama-orch/daemon-support';

/**
 * Cluster-level model catalog of orchestratord: the models nodes report in heartbeats, plus refs
 * operators registered interest in (`POST /v2/catalog/models`). Interest makes the ref visible in
 * listings and availability; nodes resolve and cache the actual files (model-provisioner), so
 * orchestratord never holds file paths or digests it did not receive. The entry id is the ref
 * itself (URL-encode it in paths). Listings use `ClusterModel` from contracts.
 *
 * With a state file (`ORCHD_STATE_DIR`) interest survives a restart: every change is written to a
 * temp file and renamed over it before it takes effect, so a failed write changes nothing.
 */

const CatalogInterestSchema = z.strictObject({
  id: z.string().min(1),
  ref: z.string().min(1),
  sha256: Sha256Schema.optional(),
  registered_at: z.iso.datetime(),
});
export type CatalogInterest = z.infer<typeof CatalogInterestSchema>;

const StateFileSchema = z.strictObject({ version: z.literal(1), interests: z.array(CatalogInterestSchema) });

export interface CatalogStoreOptions {
  /** Where interest is kept across restarts; absent = in memory only. */
  file?: string | undefined;
  logger: Log;
  /** Longest `close()` waits for a write in progress, ms. @default 2000 */
  closeTimeoutMs?: number;
}

export type CatalogStoreState = 'open' | 'closing' | 'closed';

export class CatalogStore {
  readonly #file: string | undefined;
  readonly #logger: Log;
  readonly #closeTimeoutMs: number;
  #interests = new Map<string, CatalogInterest>();
  /** Changes are written one after another, in the order they were made. */
  #writes: Promise<unknown> = Promise.resolve();
  #state: CatalogStoreState = 'open';
  #closing: Promise<void> | undefined;

  private constructor(file: string | undefined, logger: Log, closeTimeoutMs: number) {
    this.#file = file;
    this.#logger = logger;
    this.#closeTimeoutMs = closeTimeoutMs;
  }

  get state(): CatalogStoreState {
    return this.#state;
  }

  /**
   * Loads the state file when there is one. A file that is not valid is moved aside
   * (`<file>.corrupt-<ms>`, logged) rather than overwritten, and the catalog starts empty.
   */
  static async open(options: CatalogStoreOptions): Promise<CatalogStore> {
    const store = new CatalogStore(options.file, options.logger, options.closeTimeoutMs ?? 2000);
    const file = options.file;
    if (file === undefined) return store;
    await mkdir(dirname(file), { recursive: true });
    let text: string;
    try {
      text = await readFile(file, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return store;
      throw err;
    }
    let parsed: z.infer<typeof StateFileSchema> | undefined;
    try {
      const r = StateFileSchema.safeParse(JSON.parse(text));
      parsed = r.success ? r.data : undefined;
    } catch {
      parsed = undefined;
    }
    if (parsed === undefined) {
      const aside = `${file}.corrupt-${Date.now()}`;
      await rename(file, aside);
      options.logger.warn(
        {
          file,
          moved_to: aside,
          human: `Catalog state ${file} is not valid; kept it as ${aside} and started with no registered interest`,
        },
        'catalog state unreadable',
      );
      return store;
    }
    store.#interests = new Map(parsed.interests.map((i) => [i.id, i] as const));
    options.logger.info({ file, interests: store.#interests.size }, 'catalog state loaded');
    return store;
  }

  /** Registers (or refreshes) interest; resolves once it is stored. */
  register(req: CatalogRegisterRequest, now: Date): Promise<CatalogInterest> {
    const entry: CatalogInterest = {
      id: req.ref,
      ref: req.ref,
      registered_at: now.toISOString(),
      ...(req.sha256 !== undefined ? { sha256: req.sha256 } : {}),
    };
    return this.#change((next) => next.set(entry.id, entry)).then(() => entry);
  }

  get(id: string): CatalogInterest | undefined {
    return this.#interests.get(id);
  }

  /** Removes interest; false when there was none. Resolves once the removal is stored. */
  async delete(id: string): Promise<boolean> {
    if (!this.#interests.has(id)) return false;
    await this.#change((next) => next.delete(id));
    return true;
  }

  list(): CatalogInterest[] {
    return [...this.#interests.values()];
  }

  /**
   * Refuses further changes and waits for the write in progress (at most `closeTimeoutMs`; a write
   * still running then is logged and left to finish or fail on its own: its temp file is renamed
   * into place only once complete, so the state file is never half-written). Idempotent.
   */
  close(): Promise<void> {
    this.#closing ??= this.#close();
    return this.#closing;
  }

  async #close(): Promise<void> {
    this.#state = 'closing';
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<'late'>((resolve) => {
      timer = setTimeout(() => resolve('late'), this.#closeTimeoutMs);
      timer.unref();
    });
    const result = await Promise.race([this.#writes.then(() => 'written' as const), late]);
    clearTimeout(timer);
    if (result === 'late')
      this.#logger.warn(
        { file: this.#file, timeout_ms: this.#closeTimeoutMs },
        'catalog write still in progress at close',
      );
    this.#state = 'closed';
  }

  /** Applies `edit` to a copy, stores the copy, then makes it current (after earlier changes). */
  #change(edit: (next: Map<string, CatalogInterest>) => void): Promise<void> {
    if (this.#state !== 'open')
      return Promise.reject(
        new InternalError('orchestratord is shutting down; the catalog takes no changes', {
          retriable: true,
          retryAfterMs: 1000,
        }),
      );
    const run = this.#writes.then(async () => {
      const next = new Map(this.#interests);
      edit(next);
      if (this.#file !== undefined) {
        const tmp = `${this.#file}.${process.pid}.tmp`;
        await writeFile(tmp, `${JSON.stringify({ version: 1, interests: [...next.values()] }, null, 2)}\n`);
        await rename(tmp, this.#file);
      }
      this.#interests = next;
    });
    this.#writes = run.catch(() => undefined);
    return run;
  }
}
