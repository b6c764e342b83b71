/** Why a copy of a catalog model is unloaded: an operator's unload, its idle ttl, eviction for another model's load, or a swap for a model that waited for room. */
export type UnloadCause = 'operator' | 'idle' | 'eviction' | 'swap';

/** How a load this replica started ended (load-watcher.ts): `unreported` = never listed, a failure. */
export type LoadEnding = 'ready' | 'failed' | 'vanished' | 'unreported';

/**
 * What this replica did to, or saw of, one copy of a catalog model (for observers that are not the
 * caller: the dashboard's live feed). Times in ms since the epoch. The same facts as the log lines
 * `model load started`, `model load ended` / `model load failed` and `model copy unloading`.
 * - `load-started`: a node accepted the load of `pool_id`;
 * - `load-ended`: that load ended (`error`: why, when it failed);
 * - `unloading`: a node accepted to drain and remove the copy (`reason`: the words of the log line).
 */
export type ModelEvent =
  | {
      readonly type: 'load-started';
      readonly at: number;
      readonly model: string;
      readonly nodeId: string;
      readonly poolId: string;
    }
  | {
      readonly type: 'load-ended';
      readonly at: number;
      readonly model: string;
      readonly nodeId: string;
      readonly poolId: string;
      readonly ending: LoadEnding;
      readonly error: string | undefined;
    }
  | {
      readonly type: 'unloading';
      readonly at: number;
      readonly model: string;
      readonly nodeId: string;
      readonly poolId: string;
      readonly cause: UnloadCause;
      readonly reason: string;
    };

export type ModelEventListener = (e: ModelEvent) => void;

/**
 * The listeners of model events. Listeners run synchronously where the load or unload happens, so
 * they must be cheap and must not throw.
 */
export class ModelEvents {
  readonly #listeners = new Set<ModelEventListener>();

  /** Returns the unsubscribe function (idempotent). */
  subscribe(listener: ModelEventListener): () => void {
    this.#listeners.add(listener);
    return () => {
      this.#listeners.delete(listener);
    };
  }

  emit(e: ModelEvent): void {
    for (const l of this.#listeners) l(e);
  }

  clear(): void {
    this.#listeners.clear();
  }
}
