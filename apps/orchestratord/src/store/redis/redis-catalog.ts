import type {
  CatalogModelEntry,
  CatalogPutOutcome,
  CatalogRegistration,
  CatalogStore,
  LoadClaimOutcome,
} from '../catalog-store.js';
import type { RedisScripts } from './redis-scripts.js';

/**
 * The fleet catalog on Redis: one script per operation (lua/catalog-*.lua), so the names check and
 * the write, and a claim's check and grant, are each one atomic step on the server's clock.
 */
export class RedisCatalog implements CatalogStore {
  readonly #scripts: RedisScripts;

  constructor(scripts: RedisScripts) {
    this.#scripts = scripts;
  }

  put(registration: CatalogRegistration): Promise<CatalogPutOutcome> {
    return this.#scripts.catalogPut(registration);
  }

  async get(name: string): Promise<CatalogModelEntry | undefined> {
    // The script reads every entry for '' (no name is empty).
    if (name === '') return undefined;
    return (await this.#scripts.catalogRead(name))[0];
  }

  async list(): Promise<CatalogModelEntry[]> {
    return (await this.#scripts.catalogRead(undefined)).sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  }

  delete(name: string): Promise<CatalogModelEntry | undefined> {
    return this.#scripts.catalogDelete(name);
  }

  claimLoad(id: string, owner: string, ttlMs: number): Promise<LoadClaimOutcome> {
    return this.#scripts.catalogClaimLoad(id, owner, ttlMs);
  }

  releaseLoad(id: string, owner: string): Promise<boolean> {
    return this.#scripts.catalogReleaseLoad(id, owner);
  }

  recordLoadError(id: string, error: string | undefined): Promise<boolean> {
    return this.#scripts.catalogLoadError(id, error);
  }
}
