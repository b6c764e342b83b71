import type { PlacementOverrides, PoolCapability } from '@llama-orch/contracts';
import type { PromptBlocks } from '../prefix/prompt-blocks.js';
import {
  candidateKey,
  compareCandidates,
  isPlaceable,
  mayServe,
  servesModel,
  type CandidateIndex,
  type PoolCandidate,
} from '../registry/pool-view.js';

/**
 * Placement: pure functions from (task constraints, pool candidates) to a decision.
 *
 * Rules (.specs/60-orchestratord.md, Placement):
 * - A pool is *placeable* when its node is online, its state is `ready`, it reports ready and not
 *   draining, and it has an effective free slot (see registry/pool-accounting.ts).
 * - A pool is *eligible* for a task when it serves the task's model and kind (its capabilities), its ctx fits, it is not in
 *   `avoid_pools` or the task's exclusions, it is the pinned pool (mode `pin`), it is preferred
 *   (mode `prefer` with `allow_fallback: false`), and, for `determinism: strict`, it is deterministic.
 * - Among placeable eligible pools: `prefer_pools` in their order first, then the task's session
 *   affinity (the pool that served the conversation's previous turn holds its prompt in its KV
 *   cache: taken whenever it is placeable, not excluded and as preferred as the best), then the
 *   strategy: `least-loaded` (most free slots, then lowest load ratio, then pool id, then node id),
 *   `round-robin` (a shared counter over the candidates sorted by pool id, node id) or
 *   `cache-aware` (.specs/68-prefix-routing.md: the pool whose prompt cache holds the longest
 *   prefix of the prompt, unless it is busier than the least-loaded pool by the load guard's
 *   margins; with no prefix held anywhere, least-loaded, ties going to the pool whose cache the
 *   index fills least).
 * - No eligible pool at all → a typed rejection; eligible but none placeable → wait in the queue.
 *
 * Cost: one linear pass over the pools that serve the task's model when the candidates come from a
 * {@link CandidateIndex} (the node registry), or over every candidate when given a plain array;
 * round-robin adds a second pass, and a sort only when the candidates are not in pool/node order.
 */

export type PlacementStrategy = 'cache-aware' | 'least-loaded' | 'round-robin';

/** What placement needs to know about a task. */
export interface PlacementRequest {
  readonly model_ref: string;
  /** What the task needs the pool to serve (chat, completion, embeddings, rerank, infill). @default any pool of the model */
  readonly kind?: PoolCapability | undefined;
  readonly ctx: number;
  readonly determinism?: 'strict' | 'best_effort' | undefined;
  readonly placement?: PlacementOverrides | undefined;
  /** `node_id/pool_id` keys to avoid (pools that already failed this task). Soft: ignored when nothing else is eligible. */
  readonly exclude?: ReadonlySet<string> | undefined;
  /** The pool that served the task's session last; preferred while it has a free slot (never waited for). */
  readonly affinity?: PoolRef | undefined;
  /** The prompt's block hashes, for `cache-aware` placement. */
  readonly blocks?: PromptBlocks | undefined;
}

/** The prefix index as placement reads it (prefix/prefix-routing.ts; an engine's KV events could feed another). */
export interface PrefixScorer {
  /** Blocks of the prompt each pool holds, by `node_id/pool_id`; undefined when none holds any. */
  matches(blocks: PromptBlocks | undefined): ReadonlyMap<string, number> | undefined;
  /** Share of the pool's cache the index fills, 0..1. */
  occupancy(poolKey: string): number;
}

/**
 * The load guard of cache-aware placement (as SGLang's router's): the pool holding the prefix is
 * passed over for the least-loaded one when it has at least this many more busy slots and more than
 * this many times as many. Only pools with a free slot are ever candidates, so a task never waits
 * for the pool holding its prefix while another could serve it now.
 */
export const LOAD_GUARD = Object.freeze({ absoluteSlots: 2, relative: 1.5 });

function busy(c: PoolCandidate): number {
  return c.slots_total - c.free;
}

/** Whether the prefix holder `hit` is too much busier than the least-loaded pool `least` (LOAD_GUARD). */
export function overloaded(hit: PoolCandidate, least: PoolCandidate): boolean {
  const h = busy(hit);
  const l = busy(least);
  return h - l >= LOAD_GUARD.absoluteSlots && h > l * LOAD_GUARD.relative;
}

/** A pool of a node. */
export interface PoolRef {
  readonly node_id: string;
  readonly pool_id: string;
}

export type PlacementReason = 'pinned' | 'preferred' | 'fallback' | 'affinity' | 'prefix' | 'load-guard' | 'strategy';

export type PlacementDecision<C extends PoolCandidate = PoolCandidate> =
  | { readonly kind: 'assign'; readonly candidate: C; readonly reason: PlacementReason }
  | { readonly kind: 'wait'; readonly reason: string }
  | {
      readonly kind: 'reject';
      readonly code: 'POOL_UNAVAILABLE' | 'POOL_UNREADY' | 'MODEL_NOT_AVAILABLE';
      readonly message: string;
    };

/** Mutable round-robin cursor shared by all placements of one scheduler. */
export interface RoundRobinCursor {
  next: number;
}

/** Eligibility apart from the model and the task's exclusions. */
function fitsConstraints(req: PlacementRequest, c: PoolCandidate): boolean {
  if (req.kind !== undefined && !mayServe(c, req.kind)) return false;
  if (req.ctx > 0 && c.ctx > 0 && c.ctx < req.ctx) return false;
  if (req.determinism === 'strict' && !c.deterministic) return false;
  const p = req.placement;
  if (p === undefined) return true;
  if (p.avoid_pools?.includes(c.pool_id)) return false;
  if (p.mode === 'pin' && c.pool_id !== p.pin_pool_id) return false;
  if (p.mode === 'prefer' && !p.allow_fallback && !(p.prefer_pools ?? []).includes(c.pool_id)) return false;
  return true;
}

function isExcluded(req: PlacementRequest, c: PoolCandidate): boolean {
  return req.exclude !== undefined && req.exclude.size > 0 && req.exclude.has(candidateKey(c));
}

/** Static eligibility: everything that does not depend on load. */
export function isEligible(req: PlacementRequest, c: PoolCandidate, useExclusions = true): boolean {
  if (!servesModel(c, req.model_ref)) return false;
  if (!fitsConstraints(req, c)) return false;
  if (useExclusions && isExcluded(req, c)) return false;
  return true;
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

/** least-loaded order, with equally loaded pools ordered by the share of their cache the prefix index fills. */
function compareRoomy(a: PoolCandidate, b: PoolCandidate, scorer: PrefixScorer): number {
  if (a.free !== b.free || loadRatio(a) !== loadRatio(b)) return compareLeastLoaded(a, b);
  const room = scorer.occupancy(candidateKey(a)) - scorer.occupancy(candidateKey(b));
  return room !== 0 ? room : compareCandidates(a, b);
}

function isIndex<C extends PoolCandidate>(
  candidates: readonly C[] | CandidateIndex<C>,
): candidates is CandidateIndex<C> {
  return !Array.isArray(candidates);
}

/**
 * The placeable pools of one exclusion group (0: not excluded, 1: already failed this task) that
 * the choice is made among: those with the lowest prefer rank seen so far.
 */
interface Group<C extends PoolCandidate> {
  eligible: number;
  rank: number;
  count: number;
  best: C | undefined;
  /** cache-aware: the pool holding the most blocks of the prompt, and how many. */
  hit: C | undefined;
  hitBlocks: number;
}

function newGroup<C extends PoolCandidate>(): Group<C> {
  return { eligible: 0, rank: Number.POSITIVE_INFINITY, count: 0, best: undefined, hit: undefined, hitBlocks: 0 };
}

/**
 * Decides where (or whether) a task runs now. Never mutates candidates; only the round-robin cursor.
 * `scorer`: the prefix index `cache-aware` reads (without one it places as least-loaded).
 */
export function place<C extends PoolCandidate>(
  req: PlacementRequest,
  candidates: readonly C[] | CandidateIndex<C>,
  strategy: PlacementStrategy,
  rr: RoundRobinCursor,
  scorer?: PrefixScorer,
): PlacementDecision<C> {
  const p = req.placement;
  let base: readonly C[];
  // Pools from the index's per-model list serve the model by contract: no string compare per pool.
  let checkModel = true;
  if (p?.mode === 'pin') {
    const pinId = p.pin_pool_id;
    const pinned = isIndex(candidates)
      ? pinId === undefined
        ? []
        : candidates.poolsWithId(pinId)
      : candidates.filter((c) => c.pool_id === pinId);
    if (pinned.length === 0) {
      return {
        kind: 'reject',
        code: 'POOL_UNAVAILABLE',
        message: `pinned pool '${p.pin_pool_id}' is not known to the cluster`,
      };
    }
    const usable = pinned.filter((c) => servesModel(c, req.model_ref));
    if (usable.length === 0) {
      return {
        kind: 'reject',
        code: 'POOL_UNAVAILABLE',
        message: `pinned pool '${p.pin_pool_id}' does not serve model '${req.model_ref}'`,
      };
    }
    if (usable.every((c) => c.state === 'failed' || c.state === 'stopped' || c.state === 'draining' || c.draining)) {
      const c = usable[0] as C;
      return {
        kind: 'reject',
        code: 'POOL_UNREADY',
        message: `pinned pool '${c.pool_id}' is ${c.draining ? 'draining' : c.state}`,
      };
    }
    // Only pools with the pinned id can be eligible.
    base = pinned;
  } else {
    checkModel = !isIndex(candidates);
    base = isIndex(candidates) ? candidates.poolsForModel(req.model_ref) : candidates;
  }

  const prefer = p?.mode === 'prefer' ? p.prefer_pools : undefined;
  const unranked = prefer?.length ?? 0;
  const rankOf = (c: C): number => {
    if (prefer === undefined) return 0;
    const i = prefer.indexOf(c.pool_id);
    return i < 0 ? unranked : i;
  };
  const leastLoaded = strategy !== 'round-robin';
  const cacheAware = strategy === 'cache-aware' && scorer !== undefined ? scorer : undefined;
  const matches = cacheAware?.matches(req.blocks);
  // cache-aware without a match anywhere spreads new prefixes: equally loaded pools go by free cache.
  const better =
    cacheAware === undefined || matches !== undefined
      ? compareLeastLoaded
      : (a: C, b: C) => compareRoomy(a, b, cacheAware);
  const groups: [Group<C>, Group<C>] = [newGroup(), newGroup()];
  let served = false;
  let ordered = true;
  let previous: C | undefined;
  // Two field compares per pool, no key string: the pump stays allocation-free.
  const aff = req.affinity;
  let affine: C | undefined;
  for (const c of base) {
    if (checkModel && !servesModel(c, req.model_ref)) continue;
    served = true;
    if (!fitsConstraints(req, c)) continue;
    const g = groups[isExcluded(req, c) ? 1 : 0];
    g.eligible += 1;
    if (!isPlaceable(c)) continue;
    if (aff !== undefined && c.pool_id === aff.pool_id && c.node_id === aff.node_id && g === groups[0]) affine = c;
    if (!leastLoaded) {
      if (previous !== undefined && compareCandidates(previous, c) > 0) ordered = false;
      previous = c;
    }
    const rank = rankOf(c);
    if (rank < g.rank) {
      g.rank = rank;
      g.count = 1;
      g.best = c;
      g.hit = undefined;
      g.hitBlocks = 0;
    } else if (rank === g.rank) {
      g.count += 1;
      if (leastLoaded && better(c, g.best as C) < 0) g.best = c;
    } else continue;
    if (matches !== undefined) {
      const held = matches.get(candidateKey(c)) ?? 0;
      if (held > g.hitBlocks || (held > 0 && held === g.hitBlocks && compareLeastLoaded(c, g.hit as C) < 0)) {
        g.hit = c;
        g.hitBlocks = held;
      }
    }
  }

  // Exclusions are soft: pools that already failed the task count only when no other is eligible.
  const gi = groups[0].eligible > 0 ? 0 : 1;
  const group = groups[gi];
  if (group.eligible === 0) {
    if (!served)
      return { kind: 'reject', code: 'MODEL_NOT_AVAILABLE', message: `no pool serves model '${req.model_ref}'` };
    return {
      kind: 'reject',
      code: 'POOL_UNAVAILABLE',
      message: `no pool serving '${req.model_ref}' satisfies the task's constraints (${req.kind !== undefined ? `${req.kind}, ` : ''}ctx, determinism, placement)`,
    };
  }
  if (group.count === 0) return { kind: 'wait', reason: `no free slot on the ${group.eligible} eligible pool(s)` };

  // Affinity: a free slot on the session's last pool wins over the strategy (its prompt is cached
  // there), but never over a better-ranked preferred pool or the soft exclusions.
  if (affine !== undefined && gi === 0 && rankOf(affine) === group.rank) {
    return { kind: 'assign', candidate: affine, reason: p?.mode === 'pin' ? 'pinned' : 'affinity' };
  }
  if (group.hit !== undefined) {
    const least = group.best as C;
    const guarded = overloaded(group.hit, least);
    const candidate = guarded ? least : group.hit;
    let reason: PlacementReason = guarded ? 'load-guard' : 'prefix';
    if (p?.mode === 'pin') reason = 'pinned';
    else if (prefer !== undefined) reason = group.rank < unranked ? 'preferred' : 'fallback';
    return { kind: 'assign', candidate, reason };
  }
  let chosen: C;
  if (leastLoaded) {
    chosen = group.best as C;
  } else {
    const k = rr.next % group.count;
    rr.next = (rr.next + 1) % Number.MAX_SAFE_INTEGER;
    const inGroup = (c: C): boolean =>
      (!checkModel || servesModel(c, req.model_ref)) &&
      fitsConstraints(req, c) &&
      (isExcluded(req, c) ? 1 : 0) === gi &&
      isPlaceable(c) &&
      rankOf(c) === group.rank;
    chosen = ordered ? nth(base, inGroup, k) : ([...base].filter(inGroup).sort(compareCandidates)[k] as C);
  }

  let reason: PlacementReason = 'strategy';
  if (p?.mode === 'pin') reason = 'pinned';
  else if (prefer !== undefined) reason = group.rank < unranked ? 'preferred' : 'fallback';
  return { kind: 'assign', candidate: chosen, reason };
}

/** The k-th (0-based) element of `list` that passes `test`; the caller knows it exists. */
function nth<C>(list: readonly C[], test: (c: C) => boolean, k: number): C {
  let seen = 0;
  for (const c of list) {
    if (!test(c)) continue;
    if (seen === k) return c;
    seen += 1;
  }
  throw new Error(`placement: candidate ${k} vanished between passes`);
}
