import type { ModelPolicy } from '@llama-orch/contracts';

/**
 * The fleet catalog (.specs/67-models-on-demand.md): the models the cluster serves on demand, each
 * with its aliases and policy, and the load state every replica shares — why its last load failed,
 * and the load claim that lets exactly one replica start a load at a time.
 *
 * Names: an entry's id is its ref; the ref and every alias are its names, and a name belongs to one
 * entry only (checked atomically by `put`). Times are the store's clock, ms since the epoch (Redis
 * server time with the Redis store).
 */
export interface CatalogModelEntry {
  /** The ref (the catalog id is the ref itself). */
  readonly id: string;
  readonly ref: string;
  /** Expected SHA-256 of the model file, verified by the node that loads it. */
  readonly sha256?: string | undefined;
  /** Other names clients may use, in the order registered. */
  readonly aliases: readonly string[];
  readonly policy: ModelPolicy;
  /** When the entry was first registered (an update keeps it). */
  readonly registeredAt: number;
  /** Why the last load failed; absent once a later load started. */
  readonly lastError?: string | undefined;
  /** When `lastError` was recorded. */
  readonly failedAt?: number | undefined;
  /** The live load claim, when a replica holds one (see {@link CatalogStore.claimLoad}). */
  readonly load?: LoadClaim | undefined;
}

/** Who holds a model's load claim, and until when (store clock, ms). */
export interface LoadClaim {
  readonly owner: string;
  readonly until: number;
}

/** What `POST /v2/catalog/models` states: the whole entry (a re-registration replaces all of it but its load state). */
export interface CatalogRegistration {
  readonly ref: string;
  readonly sha256?: string | undefined;
  readonly aliases: readonly string[];
  readonly policy: ModelPolicy;
}

export type CatalogPutOutcome =
  | { readonly kind: 'created' | 'updated'; readonly entry: CatalogModelEntry }
  /** `name` (the ref or one of the aliases asked for) is a name of the entry `owner`; nothing changed. */
  | { readonly kind: 'conflict'; readonly name: string; readonly owner: string };

export type LoadClaimOutcome =
  /** The caller holds the claim until `until` (a claim it already held is renewed). */
  | { readonly kind: 'claimed'; readonly until: number }
  /** Another caller holds it. */
  | { readonly kind: 'held'; readonly owner: string; readonly until: number }
  /** No entry with that id. */
  | { readonly kind: 'unknown' };

export interface CatalogStore {
  /**
   * Registers or replaces an entry (id = `ref`). Refused with `conflict`, writing nothing, when the
   * ref or an alias is already a name of another entry; the names check and the write are one atomic
   * step, so two replicas registering one alias for two models cannot both succeed. An update keeps
   * `registeredAt`, `lastError` and the load claim; aliases it drops are free again.
   */
  put(registration: CatalogRegistration): Promise<CatalogPutOutcome>;
  /** The entry whose id or alias is `name`. */
  get(name: string): Promise<CatalogModelEntry | undefined>;
  /** Every entry, by id. */
  list(): Promise<CatalogModelEntry[]>;
  /** Removes the entry whose id or alias is `name` (its names are free again); the entry removed, or undefined. */
  delete(name: string): Promise<CatalogModelEntry | undefined>;
  /**
   * Claims the right to start a load of the model for `ttlMs`. Exactly one caller wins while the
   * claim lives: until `releaseLoad` or the ttl lapses (a holder that died lets it lapse). The
   * holder calling again renews it.
   */
  claimLoad(id: string, owner: string, ttlMs: number): Promise<LoadClaimOutcome>;
  /** Releases the claim when `owner` holds it; false otherwise (lapsed, another's, unknown entry). */
  releaseLoad(id: string, owner: string): Promise<boolean>;
  /**
   * Records why the model's load failed (`failedAt` = now), or with `undefined` clears it (a load
   * started). False when there is no such entry (nothing is created).
   */
  recordLoadError(id: string, error: string | undefined): Promise<boolean>;
}
