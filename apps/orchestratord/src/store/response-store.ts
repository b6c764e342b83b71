/**
 * Stored Responses (`POST /v1/responses` with `store`, `GET`/`DELETE /v1/responses/{id}`): one
 * entry per response id, its body opaque to the store, kept `ttlMs` from each write and at most
 * `maxCount` entries (the oldest written dropped first). In-process a bounded map; with Redis one
 * key per entry with its TTL, shared by every replica.
 */
export interface StoredResponseEntry {
  readonly id: string;
  /** The key that created it (undefined with auth off): only it and operator keys may read it. */
  readonly clientKey: string | undefined;
  /** What the Responses door keeps (responses/): opaque to the store. */
  readonly body: string;
}

export interface ResponseStore {
  /** Creates or replaces the entry of `entry.id`, kept `ttlMs` from now. */
  put(entry: StoredResponseEntry, ttlMs: number): Promise<void>;
  get(id: string): Promise<StoredResponseEntry | undefined>;
  /** Removes it; whether one was there. */
  delete(id: string): Promise<boolean>;
}
