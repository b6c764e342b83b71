import type {
  HeartbeatRequest,
  NodeAck,
  NodeInfo,
  NodeMemory,
  NodeRegisterRequest,
  NodeState,
  PoolSnapshot,
} from '@llama-orch/contracts';
import type { Clock, Log } from '@llama-orch/daemon-support';
import { lastSeenOf } from '../store/liveness.js';
import type { StoredNode } from '../store/node-liveness-store.js';
import type { DispatchTarget } from '../upstream/pool-client.js';
import { PoolAccounting } from './pool-accounting.js';
import { PoolIndex } from './pool-index.js';
import { SlotLease } from './slot-lease.js';
import { candidateKey, type CandidateIndex, type Lease, type PoolView } from './pool-view.js';
import type { NodeRecord, NodeRegistryOptions, RegistryEvent, RegistryState } from './registry-options.js';

/**
 * Service registry of pool-managerd nodes and their pools.
 *
 * Node states: `registering` (after register) → `online` (first heartbeat) → `offline` (no
 * heartbeat for 3 × interval, found by a per-node deadline timer, with a sweep as backstop) →
 * `online` again on its next heartbeat. A heartbeat from an unknown node returns undefined (the
 * route answers 404 so the node registers again). Offline nodes keep their pools in the registry
 * but none is placeable.
 *
 * The 3 intervals count from when the node sent its last heartbeat (its `timestamp`), not from when
 * it arrived: the node can only have failed after sending it, so a failure is found at most
 * 3 intervals after it happened however long the heartbeat was in flight or queued here. A
 * timestamp in the future or older than `plausibleTransitMs` (store/liveness.ts) on arrival (clock skew) is not
 * trusted, and the arrival time counts instead.
 *
 * Slots are leased synchronously by the scheduler, so two tasks never race for one slot between
 * heartbeats; how leases, heartbeats and marks make a pool's free slots is in `pool-accounting.ts`.
 * Every pool's view is rebuilt when something it shows changes (register, heartbeat, deregister,
 * offline, lease taken or released, a mark, a saturation running out) and kept in `PoolIndex`.
 *
 * With a shared cluster store (`livenessFromStore`), the store holds the node records and decides
 * offline; this registry is the replica's cache of them, fed by {@link applyStored} and
 * `deregister` (`cluster-node-sync.ts`), with no deadline timers of its own.
 */

export type { NodeRegistryOptions, RegistryEvent, RegistryState } from './registry-options.js';

export class NodeRegistry implements CandidateIndex<PoolView> {
  #state: RegistryState = 'running';
  readonly #nodes = new Map<string, NodeRecord>();
  readonly #accounting: PoolAccounting;
  readonly #index = new PoolIndex();
  readonly #listeners = new Set<(e: RegistryEvent) => void>();
  /** When a pool first listed each model ref (ms): the `created` of `GET /v1/models`. Never forgotten. */
  readonly #modelSince = new Map<string, number>();
  readonly #heartbeatIntervalMs: number;
  readonly #clock: Clock;
  readonly #logger: Log;
  readonly #sweep: NodeJS.Timeout | undefined;
  readonly #livenessFromStore: boolean;
  /** Bound once: runs on every read that finds a saturation due. */
  readonly #refreshKey = (key: string): void => {
    const view = this.#index.get(key);
    if (view !== undefined) this.#refreshPool(view.node_id, view.pool_id);
  };

  constructor({ heartbeatIntervalMs, clock, logger, saturationMs, livenessFromStore = false }: NodeRegistryOptions) {
    this.#heartbeatIntervalMs = heartbeatIntervalMs;
    this.#clock = clock;
    this.#logger = logger;
    this.#livenessFromStore = livenessFromStore;
    this.#accounting = new PoolAccounting(saturationMs ?? Math.min(heartbeatIntervalMs, 500));
    // Each node has its own deadline timer (exact); the sweep is only a backstop.
    if (!livenessFromStore) {
      this.#sweep = setInterval(() => this.sweep(), Math.max(10, Math.floor(heartbeatIntervalMs / 4)));
      this.#sweep.unref();
    }
  }

  get state(): RegistryState {
    return this.#state;
  }

  get heartbeatIntervalMs(): number {
    return this.#heartbeatIntervalMs;
  }

  /** Listener for state changes (the scheduler pumps on them). Returns an unsubscribe function. */
  subscribe(listener: (e: RegistryEvent) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Registers (or re-registers: overwrites, back to `registering`) a node. */
  register(req: NodeRegisterRequest): NodeAck {
    const now = this.#clock.now();
    this.#install(req, { state: 'registering', stateSince: now, lastSeen: now, pools: req.pools }, 'info');
    return { next_heartbeat_ms: this.#heartbeatIntervalMs };
  }

  #install(req: NodeRegisterRequest, n: Omit<StoredNode, 'request'>, level: 'info' | 'debug'): NodeRecord {
    const now = this.#clock.now();
    const previous = this.#nodes.get(req.node_id);
    const dispatch: DispatchTarget = { url: req.address, h2c: req.dispatch_h2c };
    const node: NodeRecord = {
      request: req,
      address: req.address,
      dispatch,
      state: n.state,
      stateSince: n.stateSince,
      lastSeen: n.lastSeen,
      pools: poolMap(n.pools),
      memory: n.memory ?? req.memory,
      deadline: undefined,
    };
    if (previous?.deadline !== undefined) clearTimeout(previous.deadline);
    this.#nodes.set(req.node_id, node);
    this.#armDeadline(req.node_id, node);
    for (const p of n.pools) this.#observe(req.node_id, p, now, n.lastSeen);
    this.#refreshNode(req.node_id, node, previous?.pools, now);
    this.#logger[level](
      {
        node_id: req.node_id,
        address: req.address,
        pools: n.pools.length,
        human: `Node ${req.node_id} registered with ${n.pools.length} pool(s) at ${req.address}`,
      },
      'node registered',
    );
    this.#emit({ type: 'registered', nodeId: req.node_id });
    return node;
  }

  /** Applies a heartbeat; undefined when the node is unknown (it must register again). */
  heartbeat(nodeId: string, req: HeartbeatRequest): NodeAck | undefined {
    const node = this.#nodes.get(nodeId);
    if (node === undefined) return undefined;
    const now = this.#clock.now();
    this.#heard(
      nodeId,
      node,
      lastSeenOf(Date.parse(req.timestamp), now, this.#heartbeatIntervalMs),
      now,
      req.pools,
      req.memory,
      'info',
    );
    return { next_heartbeat_ms: this.#heartbeatIntervalMs };
  }

  /**
   * A heartbeat: the node is online, last seen at `lastSeen`, with these pools (marks end) and, when
   * it reports it, this on-demand memory (absent: the last report stands).
   */
  #heard(
    nodeId: string,
    node: NodeRecord,
    lastSeen: number,
    stateSince: number,
    pools: readonly PoolSnapshot[],
    memory: NodeMemory | undefined,
    level: 'info' | 'debug',
  ): void {
    const now = this.#clock.now();
    const previous = node.state;
    node.lastSeen = lastSeen;
    if (memory !== undefined) node.memory = memory;
    if (previous !== 'online') node.stateSince = stateSince;
    node.state = 'online';
    this.#armDeadline(nodeId, node);
    const before = node.pools;
    node.pools = poolMap(pools);
    for (const p of pools) this.#observe(nodeId, p, now, lastSeen);
    this.#refreshNode(nodeId, node, before, now);
    if (previous !== 'online') {
      this.#logger[level]({ node_id: nodeId, from: previous, human: `Node ${nodeId} is online` }, 'node online');
      this.#emit({ type: 'online', nodeId });
    }
    this.#emit({ type: 'heartbeat', nodeId });
  }

  /** Removes a node and its pools; in-flight streams to it end on their own. */
  deregister(nodeId: string, loud = true): boolean {
    const node = this.#nodes.get(nodeId);
    if (node === undefined) return false;
    if (node.deadline !== undefined) clearTimeout(node.deadline);
    this.#nodes.delete(nodeId);
    for (const poolId of node.pools.keys())
      this.#index.set(candidateKey({ node_id: nodeId, pool_id: poolId }), undefined);
    this.#logger[loud ? 'info' : 'debug'](
      { node_id: nodeId, human: `Node ${nodeId} deregistered` },
      'node deregistered',
    );
    this.#emit({ type: 'deregistered', nodeId });
    return true;
  }

  /** Marks nodes whose last heartbeat is older than 3 intervals as offline (backstop of the per-node timers). */
  sweep(): void {
    if (this.#state !== 'running' || this.#livenessFromStore) return;
    const now = this.#clock.now();
    for (const [nodeId, node] of this.#nodes) this.#offlineIfLate(nodeId, node, now);
  }

  /**
   * A node's deadline: 3 intervals (+1 ms, so the check below sees it late) after its last
   * heartbeat was sent. A periodic sweep alone added up to its own period to the detection time.
   * A new timer each time: the remaining time depends on how long the heartbeat took to arrive.
   */
  #armDeadline(nodeId: string, node: NodeRecord): void {
    if (node.deadline !== undefined) clearTimeout(node.deadline);
    if (this.#livenessFromStore) return;
    const remaining = node.lastSeen + 3 * this.#heartbeatIntervalMs + 1 - this.#clock.now();
    node.deadline = setTimeout(
      () => {
        node.deadline = undefined;
        if (this.#state !== 'running' || this.#nodes.get(nodeId) !== node) return;
        this.#offlineIfLate(nodeId, node, this.#clock.now());
        // Timers run on the event loop's cached time and may fire a little early by the clock.
        if (node.state !== 'offline') this.#armDeadline(nodeId, node);
      },
      Math.max(0, remaining),
    );
    node.deadline.unref();
  }

  #offlineIfLate(nodeId: string, node: NodeRecord, now: number): void {
    if (node.state !== 'offline' && now - node.lastSeen > 3 * this.#heartbeatIntervalMs)
      this.#markOffline(nodeId, node, now, true);
  }

  #markOffline(nodeId: string, node: NodeRecord, since: number, loud: boolean): void {
    const now = this.#clock.now();
    node.state = 'offline';
    node.stateSince = since;
    this.#refreshNode(nodeId, node, undefined, now);
    this.#logger[loud ? 'warn' : 'debug'](
      {
        node_id: nodeId,
        last_seen_ms_ago: now - node.lastSeen,
        human: `Node ${nodeId} missed 3 heartbeats; marked offline, its pools are unplaceable`,
      },
      'node offline',
    );
    this.#emit({ type: 'offline', nodeId });
  }

  /**
   * Takes a node record as the cluster store holds it (written here or by another replica): a newer
   * registration replaces the node, a newer last-seen time is a heartbeat (marks end), offline is
   * taken as the store decided it. Older records are ignored (a list read before a heartbeat cannot
   * undo it). `loud`: this replica made the change (info/warn logs), else debug.
   */
  applyStored(n: StoredNode, loud: boolean): void {
    if (this.#state !== 'running') return;
    const nodeId = n.request.node_id;
    let node = this.#nodes.get(nodeId);
    // A later state_since while this replica saw the node online: it re-registered meanwhile.
    if (
      node === undefined ||
      (n.stateSince > node.stateSince &&
        (n.state === 'registering' || (n.state === 'online' && node.state === 'online')))
    ) {
      node = this.#install(
        n.request,
        { ...n, state: n.state === 'offline' ? 'offline' : 'registering' },
        loud ? 'info' : 'debug',
      );
    }
    // Into online: the store stamped state_since when it turned online, after the state held here began.
    if (
      n.state === 'online' &&
      (node.state === 'online' ? n.lastSeen > node.lastSeen : n.stateSince >= node.stateSince)
    ) {
      this.#heard(nodeId, node, n.lastSeen, n.stateSince, n.pools, n.memory, loud ? 'info' : 'debug');
    } else if (n.state === 'offline' && node.state !== 'offline' && n.lastSeen >= node.lastSeen) {
      node.lastSeen = n.lastSeen;
      this.#markOffline(nodeId, node, n.stateSince, loud);
    }
  }

  /** Node ids held here (the cluster sync drops those the store no longer has). */
  nodeIds(): string[] {
    return [...this.#nodes.keys()];
  }

  nodeState(nodeId: string): NodeState | undefined {
    return this.#nodes.get(nodeId)?.state;
  }

  /** When the node sent its last heartbeat (its timestamp when plausible, else the arrival), ms. */
  lastSeen(nodeId: string): number | undefined {
    return this.#nodes.get(nodeId)?.lastSeen;
  }

  list(): NodeInfo[] {
    return [...this.#nodes.entries()]
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([, n]) => ({
        node_id: n.request.node_id,
        machine_id: n.request.machine_id,
        address: n.request.address,
        ...(n.request.dispatch_h2c !== undefined ? { dispatch_h2c: n.request.dispatch_h2c } : {}),
        state: n.state,
        state_since: new Date(n.stateSince).toISOString(),
        last_seen: new Date(n.lastSeen).toISOString(),
        capabilities: n.request.capabilities,
        version: n.request.version,
        pools: [...n.pools.values()],
        ...(n.memory !== undefined ? { memory: n.memory } : {}),
      }));
  }

  /** Every pool of every node, sorted by pool id then node id (a copy the caller owns). */
  pools(): PoolView[] {
    this.#expireSaturations();
    return this.#index.all();
  }

  /** Pools that list `model`, sorted by pool id then node id. A snapshot: later changes make new lists. */
  poolsForModel(model: string): readonly PoolView[] {
    this.#expireSaturations();
    return this.#index.forModel(model);
  }

  /** The pool with this `node_id/pool_id` key ({@link candidateKey}), if listed. */
  pool(key: string): PoolView | undefined {
    return this.#index.get(key);
  }

  /** Pools with this id, sorted by node id. A snapshot: later changes make new lists. */
  poolsWithId(poolId: string): readonly PoolView[] {
    this.#expireSaturations();
    return this.#index.withPoolId(poolId);
  }

  /**
   * The model ref a name stands for: the name itself when a pool lists it as a ref, else the ref of
   * the first pool (pool id, node id order) that lists it as an alias; unknown names unchanged.
   */
  canonicalModel(name: string): string {
    const views = this.poolsForModel(name);
    for (const v of views) if (v.models.includes(name)) return name;
    return views[0]?.models[0] ?? name;
  }

  /** When a pool first listed the model ref (ms since the epoch), or undefined if none ever did. */
  modelFirstSeen(ref: string): number | undefined {
    return this.#modelSince.get(ref);
  }

  /** Views of a pool id (normally one; pool ids are meant to be unique in the cluster), online nodes first. */
  poolsById(poolId: string): PoolView[] {
    return [...this.poolsWithId(poolId)].sort(
      (a, b) => Number(b.node_state === 'online') - Number(a.node_state === 'online'),
    );
  }

  /** Takes one slot of a pool. The caller must release it when the dispatch ends, whatever the outcome. */
  lease(nodeId: string, poolId: string): Lease {
    this.#accounting.take(nodeId, poolId);
    this.#refreshPool(nodeId, poolId);
    return new SlotLease(nodeId, poolId, this.#giveBack);
  }

  /** What a lease's first `release()` does; one function for every lease. */
  readonly #giveBack = (nodeId: string, poolId: string): void => {
    this.#accounting.give(nodeId, poolId, this.#clock.now());
    this.#refreshPool(nodeId, poolId);
    this.#emit({ type: 'lease-released', nodeId, poolId });
  };

  /** The node answered 503 for a slot we thought free: stop placing there until its next heartbeat. */
  markSaturated(nodeId: string, poolId: string): void {
    this.#accounting.markSaturated(nodeId, poolId, this.#clock.now());
    this.#refreshPool(nodeId, poolId);
  }

  /**
   * A dispatch to the pool failed (engine lost, or with `wholeNode` the node unreachable): nothing
   * is placed there until the node's next heartbeat. A dead node never sends one, so its pools stay
   * unplaceable until it is marked offline — retries do not bounce off it meanwhile.
   */
  markSuspect(nodeId: string, poolId: string, wholeNode = false): void {
    const pools = wholeNode ? [...(this.#nodes.get(nodeId)?.pools.keys() ?? [poolId])] : [poolId];
    for (const p of pools) {
      this.#accounting.markSuspect(nodeId, p);
      this.#refreshPool(nodeId, p);
    }
  }

  /** Other replicas now lease `n` slots of the pool `key` (cluster lease signals); fewer than before frees slots here. */
  setForeignLeases(key: string, n: number): void {
    const view = this.#index.get(key);
    if (view === undefined) return;
    const freed = this.#accounting.setForeignLeases(key, n);
    this.#refreshKey(key);
    // Only a release elsewhere is news for the scheduler: every replica hears every lease signal.
    if (freed) this.#emit({ type: 'lease-released', nodeId: view.node_id, poolId: view.pool_id });
  }

  /** A drain was forwarded: no new leases until a heartbeat says otherwise. */
  markDraining(nodeId: string, poolId: string): void {
    this.#accounting.markDraining(nodeId, poolId);
    this.#refreshPool(nodeId, poolId);
    this.#emit({ type: 'draining', nodeId, poolId });
  }

  /** Stops the timers and drops listeners. Idempotent; never waits. */
  close(): Promise<void> {
    if (this.#state === 'running') {
      this.#state = 'closed';
      clearInterval(this.#sweep);
      for (const node of this.#nodes.values()) if (node.deadline !== undefined) clearTimeout(node.deadline);
      this.#listeners.clear();
    }
    return Promise.resolve();
  }

  /** `sentAt`: when the node sent what reports the pool (the trusted heartbeat timestamp), else `now`. */
  #observe(nodeId: string, snap: PoolSnapshot, now: number, sentAt = now): void {
    this.#accounting.observe(nodeId, snap, now, sentAt);
    for (const m of snap.models) if (!this.#modelSince.has(m)) this.#modelSince.set(m, now);
  }

  #expireSaturations(): void {
    this.#accounting.expireSaturations(this.#clock.now(), this.#refreshKey);
  }

  /** Rebuilds the views of a node's pools; pools it had in `before` but no longer lists are dropped. */
  #refreshNode(
    nodeId: string,
    node: NodeRecord,
    before: ReadonlyMap<string, PoolSnapshot> | undefined,
    now: number,
  ): void {
    if (before !== undefined) {
      for (const poolId of before.keys()) {
        if (!node.pools.has(poolId)) this.#index.set(candidateKey({ node_id: nodeId, pool_id: poolId }), undefined);
      }
    }
    for (const snap of node.pools.values()) {
      this.#index.set(
        candidateKey({ node_id: nodeId, pool_id: snap.pool_id }),
        this.#accounting.view(nodeId, node, snap, now),
      );
    }
  }

  /** Rebuilds one pool's view after its accounting changed; nothing when the pool is not listed (any more). */
  #refreshPool(nodeId: string, poolId: string): void {
    const node = this.#nodes.get(nodeId);
    const snap = node?.pools.get(poolId);
    if (node === undefined || snap === undefined) return;
    this.#index.set(
      candidateKey({ node_id: nodeId, pool_id: poolId }),
      this.#accounting.view(nodeId, node, snap, this.#clock.now()),
    );
  }

  #emit(e: RegistryEvent): void {
    for (const l of this.#listeners) l(e);
  }
}

function poolMap(pools: readonly PoolSnapshot[]): Map<string, PoolSnapshot> {
  return new Map(pools.map((p) => [p.pool_id, p] as const));
}
