import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { z } from 'zod';
import { ModelAliasSchema, ModelPolicySchema, Sha256Schema } from '@llama-orch/contracts';
import type { Clock, Log } from '@llama-orch/daemon-support';
import { InternalError } from '../../errors.js';
import type {
  CatalogModelEntry,
  CatalogPutOutcome,
  CatalogRegistration,
  CatalogStore,
  LoadClaim,
  LoadClaimOutcome,
} from '../catalog-store.js';

/**
 * The fleet catalog of one process. With a state file (`ORCHD_STATE_DIR`) the entries survive a
 * restart: every change is written to a temp file and renamed over it before it takes effect, so a
 * failed write changes nothing. Load claims live in memory only: a claim outlives no process.
 */

/** An entry as the state file keeps it (times as ISO strings: the file is for people too). */
const StoredModelSchema = z.strictObject({
  id: z.string().min(1),
  ref: z.string().min(1),
  sha256: Sha256Schema.optional(),
  aliases: z.array(ModelAliasSchema),
  policy: ModelPolicySchema,
  registered_at: z.iso.datetime(),
  last_error: z.string().optional(),
  failed_at: z.iso.datetime().optional(),
});
type StoredModel = z.infer<typeof StoredModelSchema>;

/** Version 1 held operator "interest" only (ref and digest); read as entries with the default policy. */
const StateFileV1Schema = z.strictObject({
  version: z.literal(1),
  interests: z.array(
    z.strictObject({
      id: z.string().min(1),
      ref: z.string().min(1),
      sha256: Sha256Schema.optional(),
      registered_at: z.iso.datetime(),
    }),
  ),
});
const StateFileSchema = z.strictObject({ version: z.literal(2), models: z.array(StoredModelSchema) });

export interface MemoryCatalogOptions {
  clock: Clock;
  /** Where entries are kept across restarts; absent = in memory only. */
  file?: string | undefined;
  logger?: Log | undefined;
  /** Longest `close()` waits for a write in progress, ms. @default 2000 */
  closeTimeoutMs?: number;
}

export type MemoryCatalogState = 'open' | 'closing' | 'closed';

export class MemoryCatalog implements CatalogStore {
  readonly #clock: Clock;
  readonly #file: string | undefined;
  readonly #logger: Log | undefined;
  readonly #closeTimeoutMs: number;
  #entries = new Map<string, StoredModel>();
  /** Every name (id and aliases) → its entry's id; rebuilt with each change. */
  #names = new Map<string, string>();
  readonly #claims = new Map<string, LoadClaim>();
  /** Changes are written one after another, in the order they were made. */
  #writes: Promise<unknown> = Promise.resolve();
  #state: MemoryCatalogState = 'open';
  #closing: Promise<void> | undefined;

  private constructor(options: MemoryCatalogOptions) {
    this.#clock = options.clock;
    this.#file = options.file;
    this.#logger = options.logger;
    this.#closeTimeoutMs = options.closeTimeoutMs ?? 2000;
  }

  /** A catalog without a state file (nothing to read, so no promise). */
  static inMemory(clock: Clock): MemoryCatalog {
    return new MemoryCatalog({ clock });
  }

  /**
   * Loads the state file when there is one. A file that is not valid is moved aside
   * (`<file>.corrupt-<ms>`, logged) rather than overwritten, and the catalog starts empty.
   */
  static async open(options: MemoryCatalogOptions): Promise<MemoryCatalog> {
    const catalog = new MemoryCatalog(options);
    const file = options.file;
    if (file === undefined) return catalog;
    await mkdir(dirname(file), { recursive: true });
    let text: string;
    try {
      text = await readFile(file, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return catalog;
      throw err;
    }
    const models = parseStateFile(text);
    if (models === undefined) {
      const aside = `${file}.corrupt-${Date.now()}`;
      await rename(file, aside);
      options.logger?.warn(
        {
          file,
          moved_to: aside,
          human: `Catalog state ${file} is not valid; kept it as ${aside} and started with an empty catalog`,
        },
        'catalog state unreadable',
      );
      return catalog;
    }
    catalog.#commit(new Map(models.map((m) => [m.id, m] as const)));
    options.logger?.info({ file, models: models.length }, 'catalog state loaded');
    return catalog;
  }

  get state(): MemoryCatalogState {
    return this.#state;
  }

  put(registration: CatalogRegistration): Promise<CatalogPutOutcome> {
    return this.#change<CatalogPutOutcome>((next) => {
      const id = registration.ref;
      const names = namesOf(next);
      for (const name of [id, ...registration.aliases]) {
        const owner = names.get(name);
        if (owner !== undefined && owner !== id) return { result: { kind: 'conflict', name, owner } };
      }
      const before = next.get(id);
      const stored: StoredModel = {
        id,
        ref: registration.ref,
        ...(registration.sha256 !== undefined ? { sha256: registration.sha256 } : {}),
        aliases: [...registration.aliases],
        policy: registration.policy,
        registered_at: before?.registered_at ?? new Date(this.#clock.now()).toISOString(),
        ...(before?.last_error !== undefined ? { last_error: before.last_error } : {}),
        ...(before?.failed_at !== undefined ? { failed_at: before.failed_at } : {}),
      };
      next.set(id, stored);
      return {
        changed: true,
        result: { kind: before === undefined ? 'created' : 'updated', entry: this.#entryOf(stored) },
      };
    });
  }

  get(name: string): Promise<CatalogModelEntry | undefined> {
    const id = this.#names.get(name);
    const stored = id === undefined ? undefined : this.#entries.get(id);
    return Promise.resolve(stored === undefined ? undefined : this.#entryOf(stored));
  }

  list(): Promise<CatalogModelEntry[]> {
    return Promise.resolve(
      [...this.#entries.values()].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0)).map((m) => this.#entryOf(m)),
    );
  }

  async delete(name: string): Promise<CatalogModelEntry | undefined> {
    const removed = await this.#change((next) => {
      const id = namesOf(next).get(name);
      const stored = id === undefined ? undefined : next.get(id);
      if (id === undefined || stored === undefined) return { result: undefined };
      next.delete(id);
      return { changed: true, result: this.#entryOf(stored) };
    });
    // A claim goes with its entry (a new entry of the same ref starts unclaimed).
    if (removed !== undefined) this.#claims.delete(removed.id);
    return removed;
  }

  claimLoad(id: string, owner: string, ttlMs: number): Promise<LoadClaimOutcome> {
    if (!this.#entries.has(id)) return Promise.resolve({ kind: 'unknown' });
    const now = this.#clock.now();
    const held = this.#claims.get(id);
    if (held !== undefined && held.until > now && held.owner !== owner)
      return Promise.resolve({ kind: 'held', owner: held.owner, until: held.until });
    const until = now + ttlMs;
    this.#claims.set(id, { owner, until });
    return Promise.resolve({ kind: 'claimed', until });
  }

  releaseLoad(id: string, owner: string): Promise<boolean> {
    const held = this.#claims.get(id);
    if (held === undefined || held.owner !== owner || held.until <= this.#clock.now()) return Promise.resolve(false);
    this.#claims.delete(id);
    return Promise.resolve(true);
  }

  recordLoadError(id: string, error: string | undefined): Promise<boolean> {
    return this.#change((next) => {
      const stored = next.get(id);
      if (stored === undefined) return { result: false };
      const { last_error: _e, failed_at: _f, ...rest } = stored;
      next.set(
        id,
        error === undefined
          ? rest
          : { ...rest, last_error: error, failed_at: new Date(this.#clock.now()).toISOString() },
      );
      return { changed: true, result: true };
    });
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
      this.#logger?.warn(
        { file: this.#file, timeout_ms: this.#closeTimeoutMs },
        'catalog write still in progress at close',
      );
    this.#state = 'closed';
  }

  #entryOf(m: StoredModel): CatalogModelEntry {
    const claim = this.#claims.get(m.id);
    const live = claim !== undefined && claim.until > this.#clock.now() ? claim : undefined;
    return {
      id: m.id,
      ref: m.ref,
      ...(m.sha256 !== undefined ? { sha256: m.sha256 } : {}),
      aliases: m.aliases,
      policy: m.policy,
      registeredAt: Date.parse(m.registered_at),
      ...(m.last_error !== undefined ? { lastError: m.last_error } : {}),
      ...(m.failed_at !== undefined ? { failedAt: Date.parse(m.failed_at) } : {}),
      ...(live !== undefined ? { load: { ...live } } : {}),
    };
  }

  #commit(next: Map<string, StoredModel>): void {
    this.#entries = next;
    this.#names = namesOf(next);
  }

  /**
   * Runs `edit` on a copy of the entries, after every earlier change; when it reports a change, stores
   * the copy (state file) and then makes it current. `edit` decides against the entries as every
   * earlier change left them, so its checks and its write are one step.
   */
  #change<T>(edit: (next: Map<string, StoredModel>) => { changed?: boolean; result: T }): Promise<T> {
    if (this.#state !== 'open')
      return Promise.reject(
        new InternalError('orchestratord is shutting down; the catalog takes no changes', {
          retriable: true,
          retryAfterMs: 1000,
        }),
      );
    const run = this.#writes.then(async () => {
      const next = new Map(this.#entries);
      const { changed = false, result } = edit(next);
      if (!changed) return result;
      if (this.#file !== undefined) {
        const tmp = `${this.#file}.${process.pid}.tmp`;
        const doc: z.infer<typeof StateFileSchema> = { version: 2, models: [...next.values()] };
        await writeFile(tmp, `${JSON.stringify(doc, null, 2)}\n`);
        await rename(tmp, this.#file);
      }
      this.#commit(next);
      return result;
    });
    this.#writes = run.catch(() => undefined);
    return run;
  }
}

function namesOf(entries: ReadonlyMap<string, StoredModel>): Map<string, string> {
  const names = new Map<string, string>();
  for (const m of entries.values()) {
    names.set(m.id, m.id);
    for (const a of m.aliases) names.set(a, m.id);
  }
  return names;
}

/** The entries of a state file (either version), or undefined when it is not valid. */
function parseStateFile(text: string): StoredModel[] | undefined {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return undefined;
  }
  const v2 = StateFileSchema.safeParse(json);
  if (v2.success) return v2.data.models;
  const v1 = StateFileV1Schema.safeParse(json);
  if (!v1.success) return undefined;
  const policy = ModelPolicySchema.parse({});
  return v1.data.interests.map((i) => ({ ...i, aliases: [], policy }));
}
