import {
  servesCapability,
  type NodeState,
  type PoolCapability,
  type PoolSnapshot,
  type PoolState,
} from '@llama-orch/contracts';
import type { DispatchTarget } from '../upstream/pool-client.js';

/** A pool as placement sees it: the latest heartbeat snapshot plus local lease accounting. */
export interface PoolCandidate {
  /** `node_id/pool_id` ({@link candidateKey}), when the view carries it made once. */
  readonly key?: string | undefined;
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
  /** Other names of the models (the pool's configured aliases); a task may name the model by any. */
  readonly aliases?: readonly string[] | undefined;
  readonly deterministic: boolean;
  readonly ctx: number;
  /** What the pool's engine serves (heartbeat); absent = chat and completion (contracts' DEFAULT_POOL_CAPABILITIES). */
  readonly capabilities?: readonly PoolCapability[] | undefined;
}

/** A pool with its node and accounting, as routes and placement read it. */
export interface PoolView extends PoolCandidate {
  readonly address: string;
  /** Where dispatches go: `address` over HTTP/1.1, and the node's h2c URL when it offers one. */
  readonly dispatch: DispatchTarget;
  readonly snapshot: PoolSnapshot;
  /** Estimated ms until provisioning finishes, from measured progress speed; undefined when unknown. */
  readonly provisioningEtaMs: number | undefined;
}

/**
 * Where placement looks candidates up instead of scanning the cluster (the node registry keeps
 * one). Lists are read synchronously and not kept; each must hold exactly the pools that match,
 * once each: place() does not re-check that the pools of `poolsForModel` serve the model.
 */
export interface CandidateIndex<C extends PoolCandidate = PoolCandidate> {
  /** Pools that serve `model` (a ref in `models`, or an alias), in pool id, node id order. */
  poolsForModel(model: string): readonly C[];
  /** Pools with this id (normally one; ids are meant to be unique in the cluster), in node id order. */
  poolsWithId(poolId: string): readonly C[];
}

/** One slot of a pool handed out by the registry; released when the dispatch ends, whatever the outcome. */
export interface Lease {
  readonly nodeId: string;
  readonly poolId: string;
  /** Idempotent. */
  release(): void;
}

export function candidateKey(c: { key?: string | undefined; node_id: string; pool_id: string }): string {
  return c.key ?? `${c.node_id}/${c.pool_id}`;
}

/** Deterministic order: pool id, then node id. */
export function compareCandidates(
  a: { pool_id: string; node_id: string },
  b: { pool_id: string; node_id: string },
): number {
  if (a.pool_id !== b.pool_id) return a.pool_id < b.pool_id ? -1 : 1;
  if (a.node_id !== b.node_id) return a.node_id < b.node_id ? -1 : 1;
  return 0;
}

/** Node online, pool ready and not draining, an effective free slot. */
export function isPlaceable(c: PoolCandidate): boolean {
  return c.node_state === 'online' && c.state === 'ready' && c.ready && !c.draining && c.free > 0;
}

/** The pool lists `model` as a model ref or as an alias. */
export function servesModel(c: PoolCandidate, model: string): boolean {
  return c.models.includes(model) || (c.aliases !== undefined && c.aliases.includes(model));
}

/**
 * Whether the pool serves (or may serve) `kind`: its reported capabilities, else chat and
 * completion. Infill is known only once a generation pool's engine is bound (the engine says
 * whether its model has FIM tokens), so a pool still provisioning or starting that has reported
 * nothing yet may serve infill: the task waits for it, and placement decides when it is ready.
 * (Embeddings and reranking pools report theirs from their config before any engine runs.)
 */
export function mayServe(c: Pick<PoolCandidate, 'capabilities' | 'state'>, kind: PoolCapability): boolean {
  if (kind === 'infill' && c.capabilities === undefined && (c.state === 'provisioning' || c.state === 'starting'))
    return true;
  return servesCapability(c.capabilities, kind);
}

/** Every name a pool's model answers to: refs, then aliases. */
export function modelNames(c: Pick<PoolCandidate, 'models' | 'aliases'>): readonly string[] {
  return c.aliases === undefined || c.aliases.length === 0 ? c.models : [...c.models, ...c.aliases];
}
