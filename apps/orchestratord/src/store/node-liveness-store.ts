import type { NodeMemory, NodeRegisterRequest, NodeState, PoolSnapshot } from '@llama-orch/contracts';

/**
 * What the cluster knows of one pool-managerd node. Times are the store's clock (ms since the
 * epoch): Redis server time with the Redis store, so replicas with skewed clocks agree.
 */
export interface StoredNode {
  readonly request: NodeRegisterRequest;
  readonly state: NodeState;
  /** When `state` was entered. */
  readonly stateSince: number;
  /** When the node last sent a heartbeat (its trusted timestamp), or registered. */
  readonly lastSeen: number;
  /** Pools of the last heartbeat (of the registration before the first one). */
  readonly pools: readonly PoolSnapshot[];
  /** Memory for models on demand, as last reported (the registration's, then each heartbeat's that has one). */
  readonly memory?: NodeMemory | undefined;
}

/**
 * Node registry and liveness, shared by every replica (the in-process twin of
 * `registry/node-registry.ts`'s node records). States: `registering` (register) → `online` (first
 * heartbeat) → `offline` (no heartbeat for 3 × interval) → `online` on its next heartbeat.
 *
 * Offline is decided once for the cluster: {@link sweep} marks late nodes offline in one atomic
 * step and returns each id to exactly one caller, however many replicas sweep at once, so only
 * that replica logs and acts on it.
 */
export interface NodeLivenessStore {
  /** Registers (or re-registers: overwrites, back to `registering`) a node. */
  register(req: NodeRegisterRequest): Promise<StoredNode>;
  /**
   * Applies a heartbeat. `sentAtMs` (the node's own timestamp) counts as the last-seen time when
   * it is not in the future and lags arrival by at most `min(interval / 4, 1000)` ms; else the
   * arrival time counts (clock skew). `memory`, when given, replaces the node's on-demand memory
   * (absent: the last report stands). Undefined when the node is unknown (it must register).
   */
  heartbeat(
    nodeId: string,
    pools: readonly PoolSnapshot[],
    sentAtMs: number | undefined,
    memory?: NodeMemory,
  ): Promise<{ readonly previous: NodeState } | undefined>;
  /** Removes a node; false when unknown. */
  deregister(nodeId: string): Promise<boolean>;
  /** Marks nodes silent for more than 3 intervals offline; returns the ids this call marked. */
  sweep(): Promise<string[]>;
  get(nodeId: string): Promise<StoredNode | undefined>;
  /** Every node, sorted by node id. */
  list(): Promise<StoredNode[]>;
}
