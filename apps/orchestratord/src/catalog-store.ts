import { z } from 'zod';
import type { CatalogRegisterRequest } from '@llama-orch/contracts';

/**
 * Cluster-level model catalog of orchestratord: the models nodes report in heartbeats, plus refs
 * operators registered interest in (`POST /v2/catalog/models`). Interest is an in-memory record
 * (lost on restart) that makes the ref visible in listings and availability; nodes resolve and
 * cache the actual files (model-provisioner), so orchestratord never holds file paths or digests
 * it did not receive. The entry id is the ref itself (URL-encode it in paths).
 *
 * The listing shape is local because contracts' `CatalogListSchema` describes a node's on-disk
 * catalog (`local_path`, `sha256`, `size_bytes` required), which orchestratord does not have.
 */
export const ClusterModelSchema = z.strictObject({
  /** Catalog id (the ref as nodes report it). */
  id: z.string(),
  /** Model ref. */
  ref: z.string(),
  /** `ready`: a pool serves it; `provisioning`: a pool is preparing it; `unavailable`: only failed/offline pools list it; `registered`: interest only. */
  status: z.enum(['ready', 'provisioning', 'unavailable', 'registered']),
  /** Pools (node/pool) that list the model. */
  pools: z.array(z.string()),
  /** Whether an operator registered interest in it. */
  registered: z.boolean(),
  /** Expected digest given at registration. */
  sha256: z.string().optional(),
});
export type ClusterModel = z.infer<typeof ClusterModelSchema>;
export const ClusterModelListSchema = z.strictObject({ models: z.array(ClusterModelSchema) });

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
