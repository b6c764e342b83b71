import type { CatalogRegisterRequest } from '@llama-orch/contracts';

/**
 * Cluster-level model catalog of orchestratord: the models nodes report in heartbeats, plus refs
 * operators registered interest in (`POST /v2/catalog/models`). Interest is an in-memory record
 * (lost on restart) that makes the ref visible in listings and availability; nodes resolve and
 * cache the actual files (model-provisioner), so orchestratord never holds file paths or digests
 * it did not receive. The entry id is the ref itself (URL-encode it in paths).
 * Listings use `ClusterModel` from contracts.
 */

export interface CatalogInterest {
  readonly id: string;
  readonly ref: string;
  readonly sha256?: string | undefined;
  readonly registered_at: string;
}

export class CatalogStore {
  readonly #interests = new Map<string, CatalogInterest>();

  register(req: CatalogRegisterRequest, now: Date): CatalogInterest {
    const entry: CatalogInterest = { id: req.ref, ref: req.ref, sha256: req.sha256, registered_at: now.toISOString() };
    this.#interests.set(entry.id, entry);
    return entry;
  }

  get(id: string): CatalogInterest | undefined {
    return this.#interests.get(id);
  }

  delete(id: string): boolean {
    return this.#interests.delete(id);
  }

  list(): CatalogInterest[] {
    return [...this.#interests.values()];
  }
}
