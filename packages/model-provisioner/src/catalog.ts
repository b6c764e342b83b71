import { appendFile, readFile, rename, rm } from 'node:fs/promises';
import { join, relative, isAbsolute } from 'node:path';
import type { Logger } from 'pino';
import { z } from 'zod';
import { CatalogEntrySchema, ModelLifecycleSchema } from '@llama-orch/contracts';
import type { CatalogEntry, ModelLifecycle } from '@llama-orch/contracts';
import { ModelProvisionError, cacheError } from './errors.js';
import { writeFileAtomic } from './fs-util.js';
import { acquireLock } from './lock.js';
import { isSafeModelId } from './model-ref.js';

export interface CatalogOptions {
  /** Directory of the index (`catalog.json`), its lock and `provenance.jsonl`; usually `<cacheDir>/models`. */
  dir: string;
  logger: Logger;
  /** Byte budget for models the cache owns; `evict()` without a budget uses it. Unlimited when absent. */
  budgetBytes?: number;
  /** Models a running pool uses; never evicted. Consulted in addition to `pin()`. */
  isPinned?: (id: string) => boolean;
  /**
   * Files under this directory belong to the cache: they count against the budget and are deleted
   * with their entry. Anything else (a `file:` model) is only forgotten, never deleted.
   * @default `<dir>/sha256`
   */
  storeDir?: string;
  /** Clock, for tests. @default () => new Date() */
  now?: () => Date;
}

/** What happened to a catalog entry; one JSON line in `provenance.jsonl` each. */
export type ProvenanceAction = 'add' | 'update' | 'delete' | 'evict' | 'state';

export const ProvenanceRecordSchema = z.strictObject({
  ts: z.string(),
  action: z.enum(['add', 'update', 'delete', 'evict', 'state']),
  id: z.string(),
  ref: z.string(),
  sha256: z.string(),
  size_bytes: z.number(),
  lifecycle: ModelLifecycleSchema,
  source: z.string(),
  detail: z.string().optional(),
  pid: z.number(),
});
export type ProvenanceRecord = z.infer<typeof ProvenanceRecordSchema>;

const IndexSchema = z.strictObject({
  version: z.literal(1),
  models: z.record(z.string(), CatalogEntrySchema),
});
type Index = z.infer<typeof IndexSchema>;
type Note = (action: ProvenanceAction, e: CatalogEntry, detail?: string) => void;

function assertId(id: string): void {
  if (!isSafeModelId(id)) {
    throw new ModelProvisionError(
      'INVALID_MODEL_REF',
      `invalid catalog id '${id}': expected [a-z0-9][a-z0-9._-]{0,127} without '..'`,
      { id },
    );
  }
}

/**
 * Index of the models in a node's cache. Every change is a read-modify-write of `catalog.json`
 * under a cross-process lock, written to a temp file and renamed, so several processes can
 * share one cache and a reader never sees a half-written index. Every add, update, delete,
 * eviction and state change appends one line to `provenance.jsonl`.
 */
export class Catalog {
  readonly dir: string;
  readonly storeDir: string;
  readonly indexPath: string;
  readonly provenancePath: string;
  readonly budgetBytes: number | undefined;
  private readonly log: Logger;
  private readonly pins = new Set<string>();
  private readonly isPinnedExternal: ((id: string) => boolean) | undefined;
  private readonly now: () => Date;
  // serialises this process's writers, so they queue here instead of polling the file lock
  private chain: Promise<unknown> = Promise.resolve();

  constructor(opts: CatalogOptions) {
    this.dir = opts.dir;
    this.storeDir = opts.storeDir ?? join(opts.dir, 'sha256');
    this.indexPath = join(opts.dir, 'catalog.json');
    this.provenancePath = join(opts.dir, 'provenance.jsonl');
    this.budgetBytes = opts.budgetBytes;
    this.log = opts.logger.child({ component: 'model-catalog' });
    this.isPinnedExternal = opts.isPinned;
    this.now = opts.now ?? (() => new Date());
  }

  /** Protects a model from eviction (in this process) until `unpin`. */
  pin(id: string): void {
    this.pins.add(id);
  }

  unpin(id: string): void {
    this.pins.delete(id);
  }

  isPinned(id: string): boolean {
    return this.pins.has(id) || (this.isPinnedExternal?.(id) ?? false);
  }

  /** All entries, ordered by id. */
  async list(): Promise<CatalogEntry[]> {
    const index = await this.read(false);
    return Object.values(index.models).sort((a, b) => a.id.localeCompare(b.id));
  }

  async get(id: string): Promise<CatalogEntry | undefined> {
    assertId(id);
    return (await this.read(false)).models[id];
  }

  /** Inserts or replaces an entry. */
  async put(entry: CatalogEntry): Promise<CatalogEntry> {
    const e = CatalogEntrySchema.parse(entry);
    assertId(e.id);
    return this.mutate(async (index, note) => {
      const prev = index.models[e.id];
      index.models[e.id] = e;
      const changed =
        !prev || prev.sha256 !== e.sha256 || prev.local_path !== e.local_path || prev.lifecycle !== e.lifecycle;
      if (changed) note(prev ? 'update' : 'add', e);
      return e;
    });
  }

  /** Marks a model as just used (LRU order). */
  async touch(id: string, at: Date = this.now()): Promise<CatalogEntry> {
    assertId(id);
    return this.mutate(async (index, note) => {
      const e = this.mustGet(index, id);
      e.last_used = at.toISOString();
      return e;
    });
  }

  async setState(id: string, lifecycle: ModelLifecycle): Promise<CatalogEntry> {
    assertId(id);
    const state = ModelLifecycleSchema.parse(lifecycle);
    return this.mutate(async (index, note) => {
      const e = this.mustGet(index, id);
      if (e.lifecycle !== state) {
        const from = e.lifecycle;
        e.lifecycle = state;
        note('state', e, `${from}->${state}`);
      }
      return e;
    });
  }

  /**
   * Removes an entry; its file is deleted when the cache owns it and no other entry uses it.
   * @returns false when there was no such entry.
   */
  async delete(id: string): Promise<boolean> {
    assertId(id);
    return this.mutate(async (index, note) => {
      const e = index.models[id];
      if (!e) return false;
      delete index.models[id];
      await this.removeFileIfUnused(index, e);
      note('delete', e);
      return true;
    });
  }

  /** Bytes of cache-owned files (each file counted once). */
  async usedBytes(): Promise<number> {
    return this.owned(await this.read(false));
  }

  /**
   * Evicts least-recently-used cache-owned models until their total size fits the budget.
   * Pinned models and `keep` are never evicted, so the result may stay above the budget.
   * @returns the evicted entries, oldest first.
   */
  async evict(opts: { budgetBytes?: number; keep?: Iterable<string> } = {}): Promise<CatalogEntry[]> {
    const budget = opts.budgetBytes ?? this.budgetBytes;
    if (budget === undefined) return [];
    const keep = new Set(opts.keep ?? []);
    return this.mutate(async (index, note) => {
      const evicted: CatalogEntry[] = [];
      const candidates = Object.values(index.models)
        .filter((e) => this.ownsFile(e.local_path) && !keep.has(e.id) && !this.isPinned(e.id))
        .sort((a, b) => Date.parse(a.last_used) - Date.parse(b.last_used) || a.id.localeCompare(b.id));
      for (const e of candidates) {
        if (this.owned(index) <= budget) break;
        delete index.models[e.id];
        await this.removeFileIfUnused(index, e);
        note('evict', e, `budget ${budget} bytes`);
        evicted.push(e);
        this.log.info(
          { id: e.id, size_bytes: e.size_bytes, last_used: e.last_used, budget_bytes: budget },
          'model evicted',
        );
      }
      const used = this.owned(index);
      if (used > budget)
        this.log.warn(
          { used_bytes: used, budget_bytes: budget },
          'model cache over budget: remaining models are pinned or in use',
        );
      return evicted;
    });
  }

  private ownsFile(path: string): boolean {
    const rel = relative(this.storeDir, path);
    return rel !== '' && !rel.startsWith('..') && !isAbsolute(rel);
  }

  private owned(index: Index): number {
    const sizes = new Map<string, number>();
    for (const e of Object.values(index.models)) if (this.ownsFile(e.local_path)) sizes.set(e.local_path, e.size_bytes);
    let sum = 0;
    for (const s of sizes.values()) sum += s;
    return sum;
  }

  private async removeFileIfUnused(index: Index, e: CatalogEntry): Promise<void> {
    if (!this.ownsFile(e.local_path)) return;
    if (Object.values(index.models).some((o) => o.local_path === e.local_path)) return;
    await rm(e.local_path, { force: true }).catch((err: unknown) => {
      throw cacheError(err, e.local_path);
    });
  }

  private mustGet(index: Index, id: string): CatalogEntry {
    const e = index.models[id];
    if (!e) throw new ModelProvisionError('MODEL_NOT_FOUND', `model '${id}' is not in the catalog`, { id });
    return e;
  }

  private record(action: ProvenanceAction, e: CatalogEntry, detail?: string): ProvenanceRecord {
    return {
      ts: this.now().toISOString(),
      action,
      id: e.id,
      ref: e.ref,
      sha256: e.sha256,
      size_bytes: e.size_bytes,
      lifecycle: e.lifecycle,
      source: e.provenance.source,
      ...(detail === undefined ? {} : { detail }),
      pid: process.pid,
    };
  }

  private async read(underLock: boolean): Promise<Index> {
    let text: string;
    try {
      text = await readFile(this.indexPath, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { version: 1, models: {} };
      throw cacheError(err, this.indexPath);
    }
    try {
      return IndexSchema.parse(JSON.parse(text));
    } catch (err) {
      // Only a foreign writer can produce this (ours rename complete files). The files it lists
      // are still in the store and ensure() re-registers them, so keep the evidence and go on.
      this.log.error({ err, path: this.indexPath }, 'model catalog index is malformed; starting a new one');
      if (underLock) await rename(this.indexPath, `${this.indexPath}.corrupt-${Date.now()}`).catch(() => undefined);
      return { version: 1, models: {} };
    }
  }

  private mutate<T>(fn: (index: Index, note: Note) => Promise<T>): Promise<T> {
    const run = async (): Promise<T> => {
      const release = await acquireLock(this.dir, 'catalog', { logger: this.log, staleMs: 10_000, pollMs: 20 });
      try {
        const index = await this.read(true);
        const lines: string[] = [];
        const result = await fn(index, (action, e, detail) => {
          lines.push(`${JSON.stringify(this.record(action, e, detail))}\n`);
        });
        await writeFileAtomic(this.indexPath, `${JSON.stringify(index, null, 2)}\n`);
        // appended under the lock after the index is written, so the log never records a change
        // that did not happen; one O_APPEND write per line keeps lines of several processes whole
        for (const line of lines) {
          await appendFile(this.provenancePath, line).catch((err: unknown) => {
            throw cacheError(err, this.provenancePath);
          });
        }
        return result;
      } finally {
        await release().catch((err: unknown) => this.log.warn({ err }, 'catalog lock release failed'));
      }
    };
    const p = this.chain.then(run, run);
    this.chain = p.catch(() => undefined);
    return p;
  }
}
