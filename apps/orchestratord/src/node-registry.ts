import type {
  HeartbeatRequest, NodeAck, NodeInfo, NodeRegisterRequest, NodeState, PoolSnapshot,
} from '@llama-orch/contracts';
import type { Log } from './log.js';
import type { Clock } from './clock.js';
import { candidateKey, compareCandidates, type CandidateIndex, type PoolCandidate } from './placement.js';
import type { DispatchTarget } from './pool-client.js';

/**
 * Service registry of pool-managerd nodes and their pools.
 *
 * Node states: `registering` (after register) → `online` (first heartbeat) → `offline` (no
 * heartbeat for 3 × interval, found by a per-node deadline timer, with a sweep as backstop) → `online` again on its next
 * heartbeat. A heartbeat from an unknown node returns undefined (the route answers 404 so the node
 * registers again). Offline nodes keep their pools in the registry but none is placeable.
 *
 * The 3 intervals count from when the node sent its last heartbeat (its `timestamp`), not from when
 * it arrived: the node can only have failed after sending it, so a failure is found at most
 * 3 intervals after it happened however long the heartbeat was in flight or queued here. A
 * timestamp in the future or older than {@link plausibleTransitMs} on arrival (clock skew) is not
 * trusted, and the arrival time counts instead.
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
 *
 * Views: every pool's view is rebuilt when something it shows changes (register, heartbeat,
 * deregister, offline, lease taken or released, saturated/suspect/draining mark, a saturation
 * running out) and kept in sorted lists — all pools, per model, per pool id — so that reads cost
 * no rebuild: placement looks only at the model's pools (`poolsForModel`). The per-model and
 * per-id lists are replaced, never mutated, so a list once read stays a consistent snapshot.
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
  /** Shared by the node's pool views. */
  dispatch: DispatchTarget;
  state: NodeState;
  /** When `state` was entered. */
  stateSince: number;
  /** When the last heartbeat was sent (see the class comment), or the registration arrived. */
  lastSeen: number;
  pools: Map<string, PoolSnapshot>;
  /** Fires 3 intervals after `lastSeen` (re-armed by each heartbeat). */
  deadline?: NodeJS.Timeout | undefined;
}

/** The most a heartbeat's own timestamp may lag its arrival and still be trusted, ms. */
function plausibleTransitMs(heartbeatIntervalMs: number): number {
  return Math.min(heartbeatIntervalMs / 4, 1000);
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

export interface Lease {
  readonly nodeId: string;
  readonly poolId: string;
  /** Idempotent. */
  release(): void;
}

export type RegistryState = 'running' | 'closed';

export class NodeRegistry implements CandidateIndex<PoolView> {
  #state: RegistryState = 'running';
  readonly #nodes = new Map<string, NodeRecord>();
  readonly #accounting = new Map<string, PoolAccounting>();
  readonly #listeners = new Set<(e: RegistryEvent) => void>();
  /** Current view per `node/pool` key. */
  readonly #views = new Map<string, PoolView>();
  /** Every view, in pool id, node id order; updated in place (pools() hands out copies). */
  readonly #all: PoolView[] = [];
  /** Views per model and per pool id, same order; replaced on change (copy-on-write). */
  readonly #byModel = new Map<string, readonly PoolView[]>();
  readonly #byPoolId = new Map<string, readonly PoolView[]>();
  /** Keys with a finite saturation deadline, and the earliest one: their views change with time. */
  readonly #saturated = new Set<string>();
  #nextExpiry = Number.POSITIVE_INFINITY;
  readonly #opts: Required<NodeRegistryOptions>;
  readonly #sweep: NodeJS.Timeout;

  constructor(options: NodeRegistryOptions) {
    this.#opts = { saturationMs: Math.min(options.heartbeatIntervalMs, 500), ...options };
    // Each node has its own deadline timer (exact); the sweep is only a backstop.
    this.#sweep = setInterval(() => this.sweep(), Math.max(10, Math.floor(options.heartbeatIntervalMs / 4)));
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
    const previous = this.#nodes.get(req.node_id);
    const dispatch = { url: req.address, h2c: req.dispatch_h2c };
    const node: NodeRecord = { request: req, dispatch, state: 'registering', stateSince: now, lastSeen: now, pools };
    if (previous?.deadline !== undefined) clearTimeout(previous.deadline);
    this.#nodes.set(req.node_id, node);
    this.#armDeadline(req.node_id, node);
    for (const p of req.pools) this.#observe(req.node_id, p, now);
    this.#refreshNode(req.node_id, node, previous?.pools, now);
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
    const sentAt = Date.parse(req.timestamp);
    node.lastSeen = sentAt <= now && now - sentAt <= plausibleTransitMs(this.#opts.heartbeatIntervalMs) ? sentAt : now;
    if (previous !== 'online') node.stateSince = now;
    node.state = 'online';
    this.#armDeadline(nodeId, node);
    const before = node.pools;
    node.pools = new Map(req.pools.map((p) => [p.pool_id, p] as const));
    for (const p of req.pools) this.#observe(nodeId, p, now);
    this.#refreshNode(nodeId, node, before, now);
    if (previous !== 'online') {
      this.#opts.logger.info({ node_id: nodeId, from: previous, human: `Node ${nodeId} is online` }, 'node online');
      this.#emit({ type: 'online', nodeId });
    }
    this.#emit({ type: 'heartbeat', nodeId });
    return { next_heartbeat_ms: this.#opts.heartbeatIntervalMs };
  }

  /** Removes a node and its pools; in-flight streams to it end on their own. */
  deregister(nodeId: string): boolean {
    const node = this.#nodes.get(nodeId);
    if (node === undefined) return false;
    if (node.deadline !== undefined) clearTimeout(node.deadline);
    this.#nodes.delete(nodeId);
    for (const poolId of node.pools.keys()) this.#setView(candidateKey({ node_id: nodeId, pool_id: poolId }), undefined);
    this.#opts.logger.info({ node_id: nodeId, human: `Node ${nodeId} deregistered` }, 'node deregistered');
    this.#emit({ type: 'deregistered', nodeId });
    return true;
  }

  /** Marks nodes whose last heartbeat is older than 3 intervals as offline (backstop of the per-node timers). */
  sweep(): void {
    if (this.#state !== 'running') return;
    const now = this.#opts.clock.now();
    for (const [nodeId, node] of this.#nodes) this.#offlineIfLate(nodeId, node, now);
  }

  /**
   * A node's deadline: 3 intervals (+1 ms, so the check below sees it late) after its last
   * heartbeat was sent. A periodic sweep alone added up to its own period to the detection time.
   * A new timer each time: the remaining time depends on how long the heartbeat took to arrive.
   */
  #armDeadline(nodeId: string, node: NodeRecord): void {
    if (node.deadline !== undefined) clearTimeout(node.deadline);
    const remaining = node.lastSeen + 3 * this.#opts.heartbeatIntervalMs + 1 - this.#opts.clock.now();
    node.deadline = setTimeout(() => {
      node.deadline = undefined;
      if (this.#state !== 'running' || this.#nodes.get(nodeId) !== node) return;
      this.#offlineIfLate(nodeId, node, this.#opts.clock.now());
      // Timers run on the event loop's cached time and may fire a little early by the clock.
      if (node.state !== 'offline') this.#armDeadline(nodeId, node);
    }, Math.max(0, remaining));
    node.deadline.unref();
  }

  #offlineIfLate(nodeId: string, node: NodeRecord, now: number): void {
    if (node.state === 'offline' || now - node.lastSeen <= 3 * this.#opts.heartbeatIntervalMs) return;
    node.state = 'offline';
    node.stateSince = now;
    this.#refreshNode(nodeId, node, undefined, now);
    this.#opts.logger.warn({ node_id: nodeId, last_seen_ms_ago: now - node.lastSeen, human: `Node ${nodeId} missed 3 heartbeats; marked offline, its pools are unplaceable` }, 'node offline');
    this.#emit({ type: 'offline', nodeId });
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
        ...(n.request.dispatch_h2c !== undefined ? { dispatch_h2c: n.request.dispatch_h2c } : {}),
        state: n.state,
        state_since: new Date(n.stateSince).toISOString(),
        last_seen: new Date(n.lastSeen).toISOString(),
        capabilities: n.request.capabilities,
        version: n.request.version,
        pools: [...n.pools.values()],
      }));
  }

  /** Every pool of every node, sorted by pool id then node id (a copy the caller owns). */
  pools(): PoolView[] {
    this.#expire();
    return this.#all.slice();
  }

  /** Pools that list `model`, sorted by pool id then node id. A snapshot: later changes make new lists. */
  poolsForModel(model: string): readonly PoolView[] {
    this.#expire();
    return this.#byModel.get(model) ?? [];
  }

  /** Pools with this id, sorted by node id. A snapshot: later changes make new lists. */
  poolsWithId(poolId: string): readonly PoolView[] {
    this.#expire();
    return this.#byPoolId.get(poolId) ?? [];
  }

  /** Views of a pool id (normally one; pool ids are meant to be unique in the cluster), online nodes first. */
  poolsById(poolId: string): PoolView[] {
    return [...this.poolsWithId(poolId)]
      .sort((a, b) => Number(b.node_state === 'online') - Number(a.node_state === 'online'));
  }

  /** Takes one slot of a pool. The caller must release it when the dispatch ends, whatever the outcome. */
  lease(nodeId: string, poolId: string): Lease {
    const acct = this.#acct(nodeId, poolId);
    acct.leases += 1;
    this.#refreshPool(nodeId, poolId);
    let released = false;
    return {
      nodeId,
      poolId,
      release: () => {
        if (released) return;
        released = true;
        acct.leases = Math.max(0, acct.leases - 1);
        this.#refreshPool(nodeId, poolId);
        this.#emit({ type: 'lease-released', nodeId, poolId });
      },
    };
  }

  /** The node answered 503 for a slot we thought free: stop placing there until its next heartbeat. */
  markSaturated(nodeId: string, poolId: string): void {
    const until = this.#opts.clock.now() + this.#opts.saturationMs;
    this.#acct(nodeId, poolId).saturatedUntil = until;
    const key = candidateKey({ node_id: nodeId, pool_id: poolId });
    this.#saturated.add(key);
    this.#nextExpiry = Math.min(this.#nextExpiry, until);
    this.#refreshPool(nodeId, poolId);
  }

  /**
   * A dispatch to the pool failed (engine lost, or with `wholeNode` the node unreachable): nothing
   * is placed there until the node's next heartbeat. A dead node never sends one, so its pools stay
   * unplaceable until the sweep marks it offline — retries do not bounce off it meanwhile.
   */
  markSuspect(nodeId: string, poolId: string, wholeNode = false): void {
    const pools = wholeNode ? [...(this.#nodes.get(nodeId)?.pools.keys() ?? [poolId])] : [poolId];
    for (const p of pools) {
      this.#acct(nodeId, p).saturatedUntil = Number.POSITIVE_INFINITY;
      this.#saturated.delete(candidateKey({ node_id: nodeId, pool_id: p }));
      this.#refreshPool(nodeId, p);
    }
  }

  /** A drain was forwarded: no new leases until a heartbeat says otherwise. */
  markDraining(nodeId: string, poolId: string): void {
    this.#acct(nodeId, poolId).localDraining = true;
    this.#refreshPool(nodeId, poolId);
  }

  /** Stops the sweep timer. Idempotent. */
  close(): Promise<void> {
    if (this.#state === 'running') {
      this.#state = 'closed';
      clearInterval(this.#sweep);
      for (const node of this.#nodes.values()) if (node.deadline !== undefined) clearTimeout(node.deadline);
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
    this.#saturated.delete(candidateKey({ node_id: nodeId, pool_id: snap.pool_id }));
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

  /** Rebuilds the views of a node's pools; pools it had in `before` but no longer lists are dropped. */
  #refreshNode(nodeId: string, node: NodeRecord, before: ReadonlyMap<string, PoolSnapshot> | undefined, now: number): void {
    if (before !== undefined) {
      for (const poolId of before.keys()) {
        if (!node.pools.has(poolId)) this.#setView(candidateKey({ node_id: nodeId, pool_id: poolId }), undefined);
      }
    }
    for (const snap of node.pools.values()) {
      this.#setView(candidateKey({ node_id: nodeId, pool_id: snap.pool_id }), this.#view(nodeId, node, snap, now));
    }
  }

  /** Rebuilds one pool's view after its accounting changed; nothing when the pool is not listed (any more). */
  #refreshPool(nodeId: string, poolId: string): void {
    const node = this.#nodes.get(nodeId);
    const snap = node?.pools.get(poolId);
    if (node === undefined || snap === undefined) return;
    this.#setView(candidateKey({ node_id: nodeId, pool_id: poolId }), this.#view(nodeId, node, snap, this.#opts.clock.now()));
  }

  /** Rebuilds the views whose saturation ran out (their free slots count again). */
  #expire(): void {
    const now = this.#opts.clock.now();
    if (now < this.#nextExpiry) return;
    let next = Number.POSITIVE_INFINITY;
    for (const key of this.#saturated) {
      const view = this.#views.get(key);
      const until = view === undefined ? 0 : this.#acct(view.node_id, view.pool_id).saturatedUntil;
      if (until > now) {
        next = Math.min(next, until);
        continue;
      }
      this.#saturated.delete(key);
      if (view !== undefined) this.#refreshPool(view.node_id, view.pool_id);
    }
    this.#nextExpiry = next;
  }

  /** Puts a view (or, with undefined, its absence) into the map and the sorted lists. */
  #setView(key: string, next: PoolView | undefined): void {
    const old = this.#views.get(key);
    const ref = next ?? old;
    if (ref === undefined) return;
    if (next === undefined) this.#views.delete(key);
    else this.#views.set(key, next);
    replaceSorted(this.#all, ref, next);
    const models = next?.models ?? [];
    for (const m of old?.models ?? []) if (!models.includes(m)) updateList(this.#byModel, m, ref, undefined);
    for (const m of models) updateList(this.#byModel, m, ref, next);
    updateList(this.#byPoolId, ref.pool_id, ref, next);
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
      dispatch: node.dispatch,
      snapshot: snap,
      provisioningEtaMs: eta,
    };
  }

  #emit(e: RegistryEvent): void {
    for (const l of this.#listeners) l(e);
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
function updateList(lists: Map<string, readonly PoolView[]>, name: string, ref: PoolView, next: PoolView | undefined): void {
  const list = (lists.get(name) ?? []).slice();
  replaceSorted(list, ref, next);
  if (list.length === 0) lists.delete(name);
  else lists.set(name, list);
}
