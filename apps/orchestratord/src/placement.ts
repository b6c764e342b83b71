import type { NodeState, PlacementOverrides, PoolState } from '@llama-orch/contracts';

/**
 * Placement: pure functions from (task constraints, pool candidates) to a decision.
 *
 * Rules (DESIGN §5):
 * - A pool is *placeable* when its node is online, its state is `ready`, it reports ready and not
 *   draining, and it has an effective free slot (see node-registry lease accounting).
 * - A pool is *eligible* for a task when it serves the task's model, its ctx fits, it is not in
 *   `avoid_pools` or the task's exclusions, it is the pinned pool (mode `pin`), it is preferred
 *   (mode `prefer` with `allow_fallback: false`), and, for `determinism: strict`, it is deterministic.
 * - Among placeable eligible pools: `prefer_pools` in their order first, then the strategy:
 *   `least-loaded` (most free slots, then lowest load ratio, then pool id, then node id) or
 *   `round-robin` (a shared counter over the candidates sorted by pool id, node id).
 * - No eligible pool at all → a typed rejection; eligible but none placeable → wait in the queue.
 */

export type PlacementStrategy = 'least-loaded' | 'round-robin';

/** A pool as placement sees it: the latest heartbeat snapshot plus local lease accounting. */
export interface PoolCandidate {
  readonly node_id: string;
  readonly pool_id: string;
  readonly node_state: NodeState;
  readonly state: PoolState;
  readonly ready: boolean;
  readonly draining: boolean;
  readonly slots_total: number;
  /** Effective free slots (heartbeat adjusted by local leases); 0 while marked saturated. */
  readonly free: number;
  readonly leased: number;
  readonly models: readonly string[];
  readonly deterministic: boolean;
  readonly ctx: number;
}

/** What placement needs to know about a task. */
export interface PlacementRequest {
  readonly model_ref: string;
  readonly ctx: number;
  readonly determinism?: 'strict' | 'best_effort' | undefined;
  readonly placement?: PlacementOverrides | undefined;
  /** `node_id/pool_id` keys to avoid (pools that already failed this task). Soft: ignored when nothing else is eligible. */
  readonly exclude?: ReadonlySet<string> | undefined;
}

export type PlacementReason = 'pinned' | 'preferred' | 'fallback' | 'strategy';

export type PlacementDecision =
  | { readonly kind: 'assign'; readonly candidate: PoolCandidate; readonly reason: PlacementReason }
  | { readonly kind: 'wait'; readonly reason: string }
  | { readonly kind: 'reject'; readonly code: 'POOL_UNAVAILABLE' | 'POOL_UNREADY' | 'MODEL_NOT_AVAILABLE'; readonly message: string };

/** Mutable round-robin cursor shared by all placements of one dispatcher. */
export interface RoundRobinCursor {
  next: number;
}

export function candidateKey(c: { node_id: string; pool_id: string }): string {
  return `${c.node_id}/${c.pool_id}`;
}

export function isPlaceable(c: PoolCandidate): boolean {
  return c.node_state === 'online' && c.state === 'ready' && c.ready && !c.draining && c.free > 0;
}

export function servesModel(c: PoolCandidate, model: string): boolean {
  return c.models.includes(model);
}

/** Static eligibility: everything that does not depend on load. */
export function isEligible(req: PlacementRequest, c: PoolCandidate, useExclusions = true): boolean {
  if (!servesModel(c, req.model_ref)) return false;
  if (req.ctx > 0 && c.ctx > 0 && c.ctx < req.ctx) return false;
  if (req.determinism === 'strict' && !c.deterministic) return false;
  const p = req.placement;
  if (p?.avoid_pools?.includes(c.pool_id)) return false;
  if (p?.mode === 'pin' && c.pool_id !== p.pin_pool_id) return false;
  if (p?.mode === 'prefer' && !p.allow_fallback && !(p.prefer_pools ?? []).includes(c.pool_id)) return false;
  if (useExclusions && req.exclude?.has(candidateKey(c))) return false;
  return true;
}

/** Deterministic order: pool id, then node id. */
export function compareCandidates(a: PoolCandidate, b: PoolCandidate): number {
  if (a.pool_id !== b.pool_id) return a.pool_id < b.pool_id ? -1 : 1;
  if (a.node_id !== b.node_id) return a.node_id < b.node_id ? -1 : 1;
  return 0;
}

function loadRatio(c: PoolCandidate): number {
  return c.slots_total === 0 ? 1 : (c.slots_total - c.free) / c.slots_total;
}

/** least-loaded order: most free slots, then lowest load ratio, then pool id, node id. */
export function compareLeastLoaded(a: PoolCandidate, b: PoolCandidate): number {
  if (a.free !== b.free) return b.free - a.free;
  const ra = loadRatio(a);
  const rb = loadRatio(b);
  if (ra !== rb) return ra - rb;
  return compareCandidates(a, b);
}

function pickByStrategy(list: readonly PoolCandidate[], strategy: PlacementStrategy, rr: RoundRobinCursor): PoolCandidate {
  if (strategy === 'round-robin') {
    const sorted = [...list].sort(compareCandidates);
    const chosen = sorted[rr.next % sorted.length] as PoolCandidate;
    rr.next = (rr.next + 1) % Number.MAX_SAFE_INTEGER;
    return chosen;
  }
  return [...list].sort(compareLeastLoaded)[0] as PoolCandidate;
}

/** Decides where (or whether) a task runs now. Never mutates candidates; only the round-robin cursor. */
export function place(
  req: PlacementRequest,
  candidates: readonly PoolCandidate[],
  strategy: PlacementStrategy,
  rr: RoundRobinCursor,
): PlacementDecision {
  const p = req.placement;
  if (p?.mode === 'pin') {
    const pinned = candidates.filter((c) => c.pool_id === p.pin_pool_id);
    if (pinned.length === 0) {
      return { kind: 'reject', code: 'POOL_UNAVAILABLE', message: `pinned pool '${p.pin_pool_id}' is not known to the cluster` };
    }
    if (!pinned.some((c) => servesModel(c, req.model_ref))) {
      return { kind: 'reject', code: 'POOL_UNAVAILABLE', message: `pinned pool '${p.pin_pool_id}' does not serve model '${req.model_ref}'` };
    }
    const usable = pinned.filter((c) => servesModel(c, req.model_ref));
    if (usable.every((c) => c.state === 'failed' || c.state === 'stopped' || c.state === 'draining' || c.draining)) {
      const c = usable[0] as PoolCandidate;
      return { kind: 'reject', code: 'POOL_UNREADY', message: `pinned pool '${c.pool_id}' is ${c.draining ? 'draining' : c.state}` };
    }
  }

  let eligible = candidates.filter((c) => isEligible(req, c, true));
  if (eligible.length === 0 && req.exclude !== undefined && req.exclude.size > 0) {
    eligible = candidates.filter((c) => isEligible(req, c, false));
  }
  if (eligible.length === 0) {
    if (!candidates.some((c) => servesModel(c, req.model_ref))) {
      return { kind: 'reject', code: 'MODEL_NOT_AVAILABLE', message: `no pool serves model '${req.model_ref}'` };
    }
    return {
      kind: 'reject',
      code: 'POOL_UNAVAILABLE',
      message: `no pool serving '${req.model_ref}' satisfies the task's constraints (ctx, determinism, placement)`,
    };
  }
  const placeable = eligible.filter(isPlaceable);
  if (placeable.length === 0) return { kind: 'wait', reason: `no free slot on the ${eligible.length} eligible pool(s)` };

  if (p?.mode === 'pin') return { kind: 'assign', candidate: pickByStrategy(placeable, strategy, rr), reason: 'pinned' };
  if (p?.mode === 'prefer' && p.prefer_pools !== undefined) {
    for (const poolId of p.prefer_pools) {
      const preferred = placeable.filter((c) => c.pool_id === poolId);
      if (preferred.length > 0) return { kind: 'assign', candidate: pickByStrategy(preferred, strategy, rr), reason: 'preferred' };
    }
    return { kind: 'assign', candidate: pickByStrategy(placeable, strategy, rr), reason: 'fallback' };
  }
  return { kind: 'assign', candidate: pickByStrategy(placeable, strategy, rr), reason: 'strategy' };
}
