import type { NodeMemory, NodeState, PoolLoadRequest, PoolSnapshot, PoolState } from '@llama-orch/contracts';

/*
 * What the catalog reads of the live fleet and asks of its nodes. The catalog sits below the node
 * registry and beside the node client (ARCHITECTURE.md, Layers), so it names only the facts it
 * needs; the app hands it the registry and the pool client, which have them.
 */

/** A pool as the catalog reads it (the registry's pool views satisfy it). */
export interface FleetPool {
  readonly node_id: string;
  readonly pool_id: string;
  readonly node_state: NodeState;
  readonly state: PoolState;
  /** No new work (draining on the node, or an unload forwarded from here). */
  readonly draining: boolean;
  readonly models: readonly string[];
  readonly aliases?: readonly string[] | undefined;
  readonly slots_total: number;
  /** Free slots as this replica knows them: the node's last report less the slots leased here since. */
  readonly free: number;
  /** The node's last report of the pool: origin, idle_since, memory_bytes, last_error. */
  readonly snapshot: PoolSnapshot;
}

/** A node as the catalog reads it (the registry's node list satisfies it). */
export interface FleetNode {
  readonly node_id: string;
  readonly address: string;
  readonly state: NodeState;
  /** Memory for models on demand; absent = the node loads no model on request. */
  readonly memory?: NodeMemory | undefined;
}

export interface Fleet {
  nodes(): readonly FleetNode[];
  pools(): readonly FleetPool[];
  /** Nothing new is placed on the pool until its node says otherwise (an unload was forwarded). */
  markDraining(nodeId: string, poolId: string): void;
  /** Called after every change of the fleet (register, heartbeat, offline…); returns the unsubscribe. */
  subscribe(listener: () => void): () => void;
}

/** A node's answer to a load or an unload: its status and JSON body (an ErrorEnvelope when refused). */
export interface NodeAnswer {
  readonly status: number;
  readonly body: unknown;
}

/** The calls to pool-managerd the catalog makes (`PoolClient`); an unreachable node rejects. */
export interface NodeLoadClient {
  /** `POST <node>/v2/pools`: start a pool for a catalog model (202 with its status). */
  loadPool(address: string, body: PoolLoadRequest): Promise<NodeAnswer>;
  /** `DELETE <node>/v2/pools/{id}?deadline_ms=`: drain and remove a pool the catalog loaded. */
  unloadPool(address: string, poolId: string, deadlineMs: number): Promise<NodeAnswer>;
}

/** `node/pool`, as the cluster names a pool. */
export function poolKey(p: { readonly node_id: string; readonly pool_id: string }): string {
  return `${p.node_id}/${p.pool_id}`;
}

/** Every name the pool's model answers to: its refs, then its aliases. */
export function poolNames(p: Pick<FleetPool, 'models' | 'aliases'>): readonly string[] {
  return p.aliases === undefined || p.aliases.length === 0 ? p.models : [...p.models, ...p.aliases];
}

/** From a node's YAML (a pinned model), not loaded by the catalog. */
export function isStaticPool(p: Pick<FleetPool, 'snapshot'>): boolean {
  return (p.snapshot.origin ?? 'config') === 'config';
}

/** A copy of the model: on a node not offline, serving or about to (ready, provisioning, starting) and not draining. */
export function isCopy(p: FleetPool): boolean {
  return (
    p.node_state !== 'offline' &&
    !p.draining &&
    (p.state === 'ready' || p.state === 'provisioning' || p.state === 'starting')
  );
}

/** A copy still being prepared. */
export function isLoading(p: FleetPool): boolean {
  return isCopy(p) && p.state !== 'ready';
}
