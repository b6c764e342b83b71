import type {
  HeartbeatRequest, NodeAck, NodeInfo, NodeRegisterRequest, NodeState, PoolSnapshot,
} from '@llama-orch/contracts';
import type { Log } from './log.js';
import type { Clock } from './clock.js';
import { candidateKey, type PoolCandidate } from './placement.js';

/**
 * Service registry of pool-managerd nodes and their pools.
 *
 * Node states: `registering` (after register) → `online` (first heartbeat) → `offline` (no
 * heartbeat for 3 × interval, found by an unref'd sweep timer) → `online` again on its next
 * heartbeat. A heartbeat from an unknown node returns undefined (the route answers 404 so the node
 * registers again). Offline nodes keep their pools in the registry but none is placeable.
 *
 * Lease accounting (slots orchestratord has handed out and not yet got back):
 *   foreign_busy   = max(0, (slots_total − hb.slots_free) − leases_at_last_heartbeat)
 *   effective_free = clamp(slots_total − leases_now − foreign_busy, 0, slots_total)
 * Busy slots in a heartbeat are assumed to be ours up to the number of leases we held when it
 * arrived, so they are never counted twice; a lease released after that heartbeat frees its slot
 * at once (no stall until the next heartbeat); slots busy for other reasons stay unavailable.
 * Leases are taken synchronously by the dispatcher, so two tasks never race for one slot between
 * heartbeats. When a node still answers 503 (it had not freed the slot yet), the pool is marked
 * saturated (free = 0) until its next heartbeat or `saturationMs`, whichever comes first; when a
 * dispatch failed (engine or node lost) it is suspect (free = 0) until the node's next heartbeat.
 */

export type RegistryEvent =
  | { readonly type: 'registered' | 'online' | 'offline' | 'deregistered'; readonly nodeId: string }
  | { readonly type: 'heartbeat'; readonly nodeId: string }
  | { readonly type: 'lease-released'; readonly nodeId: string; readonly poolId: string };

export interface NodeRegistryOptions {
  /** Expected heartbeat interval (ms); offline after 3 missed. */
  heartbeatIntervalMs: number;
  clock: Clock;
  logger: Log;
  /** How long a pool that answered 503 stays saturated without a heartbeat. @default min(heartbeatIntervalMs, 500) */
  saturationMs?: number;
}

interface PoolAccounting {
  leases: number;
  leasesAtHeartbeat: number;
  saturatedUntil: number;
  localDraining: boolean;
  /** Provisioning progress (0..1) and when it was seen, for an ETA. */
  progressAt?: { value: number; at: number } | undefined;
  /** Measured provisioning speed, fraction per ms. */
  progressRate?: number | undefined;
}

interface NodeRecord {
  request: NodeRegisterRequest;
  state: NodeState;
  lastSeen: number;
  pools: Map<string, PoolSnapshot>;
}

/** A pool with its node and accounting, as routes and placement read it. */
export interface PoolView extends PoolCandidate {
  readonly address: string;
  readonly snapshot: PoolSnapshot;
  /** Estimated ms until provisioning finishes, from measured progress speed; undefined when unknown. */
  readonly provisioningEtaMs: number | undefined;
}

export interface Lease {
  readonly nodeId: string;
  readonly poolId: string;
  /** Idempotent. */
  release(): void;
}

export type RegistryState = 'running' | 'closed';

export class NodeRegistry {
  #state: RegistryState = 'running';
  readonly #nodes = new Map<string, NodeRecord>();
  readonly #accounting = new Map<string, PoolAccounting>();
  readonly #listeners = new Set<(e: RegistryEvent) => void>();
  readonly #opts: Required<NodeRegistryOptions>;
  readonly #sweep: NodeJS.Timeout;

  constructor(options: NodeRegistryOptions) {
    this.#opts = { saturationMs: Math.min(options.heartbeatIntervalMs, 500), ...options };
    // a fine sweep keeps detection close to the 3-interval budget (the sweep period adds to it)
    this.#sweep = setInterval(() => this.sweep(), Math.max(10, Math.floor(options.heartbeatIntervalMs / 20)));
    this.#sweep.unref();
  }

  get state(): RegistryState {
    return this.#state;
  }

  get heartbeatIntervalMs(): number {
    return this.#opts.heartbeatIntervalMs;
  }

  /** Listener for state changes (the dispatcher pumps on them). Returns an unsubscribe function. */
  subscribe(listener: (e: RegistryEvent) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Registers (or re-registers: overwrites, back to `registering`) a node. */
  register(req: NodeRegisterRequest): NodeAck {
    const now = this.#opts.clock.now();
    const pools = new Map(req.pools.map((p) => [p.pool_id, p] as const));
    this.#nodes.set(req.node_id, { request: req, state: 'registering', lastSeen: now, pools });
    for (const p of req.pools) this.#observe(req.node_id, p, now);
    this.#opts.logger.info({ node_id: req.node_id, address: req.address, pools: req.pools.length, human: `Node ${req.node_id} registered with ${req.pools.length} pool(s) at ${req.address}` }, 'node registered');
    this.#emit({ type: 'registered', nodeId: req.node_id });
    return { next_heartbeat_ms: this.#opts.heartbeatIntervalMs };
  }

  /** Applies a heartbeat; undefined when the node is unknown (it must register again). */
  heartbeat(nodeId: string, req: HeartbeatRequest): NodeAck | undefined {
    const node = this.#nodes.get(nodeId);
    if (node === undefined) return undefined;
    const now = this.#opts.clock.now();
    const previous = node.state;
    node.lastSeen = now;
    node.state = 'online';
    node.pools = new Map(req.pools.map((p) => [p.pool_id, p] as const));
    for (const p of req.pools) this.#observe(nodeId, p, now);
    if (previous !== 'online') {
      this.#opts.logger.info({ node_id: nodeId, from: previous, human: `Node ${nodeId} is online` }, 'node online');
      this.#emit({ type: 'online', nodeId });
    }
    this.#emit({ type: 'heartbeat', nodeId });
    return { next_heartbeat_ms: this.#opts.heartbeatIntervalMs };
  }

  /** Removes a node and its pools; in-flight streams to it end on their own. */
  deregister(nodeId: string): boolean {
    if (!this.#nodes.delete(nodeId)) return false;
    this.#opts.logger.info({ node_id: nodeId, human: `Node ${nodeId} deregistered` }, 'node deregistered');
    this.#emit({ type: 'deregistered', nodeId });
    return true;
  }

  /** Marks nodes whose last heartbeat is older than 3 intervals as offline. Called by the timer. */
  sweep(): void {
    if (this.#state !== 'running') return;
    const now = this.#opts.clock.now();
    const timeout = 3 * this.#opts.heartbeatIntervalMs;
    for (const [nodeId, node] of this.#nodes) {
      if (node.state !== 'offline' && now - node.lastSeen > timeout) {
        node.state = 'offline';
        this.#opts.logger.warn({ node_id: nodeId, last_seen_ms_ago: now - node.lastSeen, human: `Node ${nodeId} missed 3 heartbeats; marked offline, its pools are unplaceable` }, 'node offline');
        this.#emit({ type: 'offline', nodeId });
      }
    }
  }

  nodeState(nodeId: string): NodeState | undefined {
    return this.#nodes.get(nodeId)?.state;
  }

  list(): NodeInfo[] {
    return [...this.#nodes.entries()]
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([, n]) => ({
        node_id: n.request.node_id,
        machine_id: n.request.machine_id,
        address: n.request.address,
        state: n.state,
        last_seen: new Date(n.lastSeen).toISOString(),
        capabilities: n.request.capabilities,
        version: n.request.version,
        pools: [...n.pools.values()],
      }));
  }

  /** Every pool of every node, sorted by pool id then node id. */
  pools(): PoolView[] {
    const now = this.#opts.clock.now();
    const out: PoolView[] = [];
    for (const [nodeId, node] of this.#nodes) {
      for (const snap of node.pools.values()) out.push(this.#view(nodeId, node, snap, now));
    }
    return out.sort((a, b) => (a.pool_id !== b.pool_id ? (a.pool_id < b.pool_id ? -1 : 1) : a.node_id < b.node_id ? -1 : a.node_id > b.node_id ? 1 : 0));
  }

  /** Views of a pool id (normally one; pool ids are meant to be unique in the cluster), online nodes first. */
  poolsById(poolId: string): PoolView[] {
    return this.pools()
      .filter((p) => p.pool_id === poolId)
      .sort((a, b) => Number(b.node_state === 'online') - Number(a.node_state === 'online'));
  }

  /** Takes one slot of a pool. The caller must release it when the dispatch ends, whatever the outcome. */
  lease(nodeId: string, poolId: string): Lease {
    const acct = this.#acct(nodeId, poolId);
    acct.leases += 1;
    let released = false;
    return {
      nodeId,
      poolId,
      release: () => {
        if (released) return;
        released = true;
        acct.leases = Math.max(0, acct.leases - 1);
        this.#emit({ type: 'lease-released', nodeId, poolId });
      },
    };
  }

  /** The node answered 503 for a slot we thought free: stop placing there until its next heartbeat. */
  markSaturated(nodeId: string, poolId: string): void {
    this.#acct(nodeId, poolId).saturatedUntil = this.#opts.clock.now() + this.#opts.saturationMs;
  }

  /**
   * A dispatch to the pool failed (engine lost, or with `wholeNode` the node unreachable): nothing
   * is placed there until the node's next heartbeat. A dead node never sends one, so its pools stay
   * unplaceable until the sweep marks it offline — retries do not bounce off it meanwhile.
   */
  markSuspect(nodeId: string, poolId: string, wholeNode = false): void {
    const pools = wholeNode ? [...(this.#nodes.get(nodeId)?.pools.keys() ?? [poolId])] : [poolId];
    for (const p of pools) this.#acct(nodeId, p).saturatedUntil = Number.POSITIVE_INFINITY;
  }

  /** A drain was forwarded: no new leases until a heartbeat says otherwise. */
  markDraining(nodeId: string, poolId: string): void {
    this.#acct(nodeId, poolId).localDraining = true;
  }

  /** Stops the sweep timer. Idempotent. */
  close(): Promise<void> {
    if (this.#state === 'running') {
      this.#state = 'closed';
      clearInterval(this.#sweep);
      this.#listeners.clear();
    }
    return Promise.resolve();
  }

  #acct(nodeId: string, poolId: string): PoolAccounting {
    const key = candidateKey({ node_id: nodeId, pool_id: poolId });
    let acct = this.#accounting.get(key);
    if (acct === undefined) {
      acct = { leases: 0, leasesAtHeartbeat: 0, saturatedUntil: 0, localDraining: false };
      this.#accounting.set(key, acct);
    }
    return acct;
  }

  #observe(nodeId: string, snap: PoolSnapshot, now: number): void {
    const acct = this.#acct(nodeId, snap.pool_id);
    acct.leasesAtHeartbeat = acct.leases;
    acct.saturatedUntil = 0;
    acct.localDraining = false;
    if (snap.progress !== undefined && (snap.state === 'provisioning' || snap.state === 'starting')) {
      const value = (snap.progress.engine + snap.progress.model) / 2;
      const prev = acct.progressAt;
      if (prev !== undefined && value > prev.value && now > prev.at) acct.progressRate = (value - prev.value) / (now - prev.at);
      acct.progressAt = { value, at: now };
    } else {
      acct.progressAt = undefined;
      acct.progressRate = undefined;
    }
  }

  #view(nodeId: string, node: NodeRecord, snap: PoolSnapshot, now: number): PoolView {
    const acct = this.#acct(nodeId, snap.pool_id);
    const total = snap.slots_total;
    const busyReported = Math.max(0, total - snap.slots_free);
    const foreignBusy = Math.max(0, busyReported - acct.leasesAtHeartbeat);
    let free = Math.min(total, Math.max(0, total - acct.leases - foreignBusy));
    if (acct.saturatedUntil > now) free = 0;
    const progress = acct.progressAt;
    const eta = progress !== undefined && acct.progressRate !== undefined && acct.progressRate > 0
      ? Math.round((1 - progress.value) / acct.progressRate) : undefined;
    return {
      node_id: nodeId,
      pool_id: snap.pool_id,
      node_state: node.state,
      state: snap.state,
      ready: snap.ready,
      draining: snap.draining || acct.localDraining,
      slots_total: total,
      free,
      leased: acct.leases,
      models: snap.models,
      deterministic: snap.deterministic,
      ctx: snap.ctx,
      address: node.request.address,
      snapshot: snap,
      provisioningEtaMs: eta,
    };
  }

  #emit(e: RegistryEvent): void {
    for (const l of this.#listeners) l(e);
  }
}
