/** sessionStorage key of the API key: kept for the tab's life, gone when the tab closes. */
export const API_KEY_STORAGE = 'llorch.apiKey';

/** The slice of the Web Storage API the store uses (sessionStorage in the page, a Map in tests). */
export type KeyStorage = Pick<Storage, 'getItem' | 'setItem' | 'removeItem'>;

/**
 * The operator's API key for orchestratord (sent as `Authorization: Bearer`). Held in memory and
 * mirrored to sessionStorage so a reload keeps it; a storage that throws (some private modes)
 * leaves it in memory only, and the key form asks again after a reload.
 */
export class KeyStore {
  #key: string | undefined;
  readonly #storage: KeyStorage | undefined;

  constructor(storage: KeyStorage | undefined) {
    this.#storage = storage;
    try {
      this.#key = storage?.getItem(API_KEY_STORAGE) ?? undefined;
    } catch {
      this.#key = undefined;
    }
  }

  get(): string | undefined {
    return this.#key;
  }

  set(key: string): void {
    this.#key = key;
    try {
      this.#storage?.setItem(API_KEY_STORAGE, key);
    } catch {
      // memory only; see the class comment
    }
  }

  clear(): void {
    this.#key = undefined;
    try {
      this.#storage?.removeItem(API_KEY_STORAGE);
    } catch {
      // nothing stored
    }
  }
}
