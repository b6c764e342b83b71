import { compareCandidates, modelNames, type PoolView } from './pool-view.js';

/**
 * The registry's current pool views, kept sorted by pool id then node id: all of them, per model
 * name (each ref and alias) and per pool id. Reads cost no rebuild: placement looks only at the model's pools. The per-model
 * and per-id lists are replaced, never mutated (copy-on-write), so a list once read stays a
 * consistent snapshot; the list of all views is updated in place and handed out as a copy.
 */
export class PoolIndex {
  /** Current view per `node/pool` key. */
  readonly #views = new Map<string, PoolView>();
  readonly #all: PoolView[] = [];
  readonly #byModel = new Map<string, readonly PoolView[]>();
  readonly #byPoolId = new Map<string, readonly PoolView[]>();

  get(key: string): PoolView | undefined {
    return this.#views.get(key);
  }

  /** Every view, sorted (a copy the caller owns). */
  all(): PoolView[] {
    return this.#all.slice();
  }

  forModel(model: string): readonly PoolView[] {
    return this.#byModel.get(model) ?? [];
  }

  withPoolId(poolId: string): readonly PoolView[] {
    return this.#byPoolId.get(poolId) ?? [];
  }

  /** Puts a view (or, with undefined, its absence) into the map and the sorted lists. */
  set(key: string, next: PoolView | undefined): void {
    const old = this.#views.get(key);
    const ref = next ?? old;
    if (ref === undefined) return;
    if (next === undefined) this.#views.delete(key);
    else this.#views.set(key, next);
    replaceSorted(this.#all, ref, next);
    // Indexed under every name of the model (refs and aliases): a task may use any of them.
    const models = next === undefined ? [] : modelNames(next);
    for (const m of old === undefined ? [] : modelNames(old))
      if (!models.includes(m)) updateList(this.#byModel, m, ref, undefined);
    for (const m of models) updateList(this.#byModel, m, ref, next);
    updateList(this.#byPoolId, ref.pool_id, ref, next);
  }
}

/** Index of `ref` (by pool id, node id) in a sorted list, or where it would go. */
function search(list: readonly PoolView[], ref: PoolView): { index: number; found: boolean } {
  let lo = 0;
  let hi = list.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    const c = compareCandidates(list[mid] as PoolView, ref);
    if (c === 0) return { index: mid, found: true };
    if (c < 0) lo = mid + 1;
    else hi = mid;
  }
  return { index: lo, found: false };
}

/** In place: replaces or inserts (next defined) or removes (next undefined) the entry with `ref`'s key. */
function replaceSorted(list: PoolView[], ref: PoolView, next: PoolView | undefined): void {
  const { index, found } = search(list, ref);
  if (found) {
    if (next === undefined) list.splice(index, 1);
    else list[index] = next;
  } else if (next !== undefined) {
    list.splice(index, 0, next);
  }
}

/** Copy-on-write update of one list in `lists` (lists handed out earlier stay as they were). */
function updateList(
  lists: Map<string, readonly PoolView[]>,
  name: string,
  ref: PoolView,
  next: PoolView | undefined,
): void {
  const list = (lists.get(name) ?? []).slice();
  replaceSorted(list, ref, next);
  if (list.length === 0) lists.delete(name);
  else lists.set(name, list);
}
