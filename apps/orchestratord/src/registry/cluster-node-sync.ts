import type { HeartbeatRequest, NodeAck, NodeRegisterRequest } from '@llama-orch/contracts';
import { systemClock, type Clock, type Log } from '@llama-orch/daemon-support';
import type { NodeLivenessStore } from '../store/node-liveness-store.js';
import type { NodeRegistry } from './node-registry.js';

export interface ClusterNodeSyncOptions {
  registry: NodeRegistry;
  store: NodeLivenessStore;
  logger: Log;
  /** Sweep and refresh period, ms. @default max(10, heartbeat interval / 4) */
  periodMs?: number;
  /** @default systemClock */
  clock?: Clock | undefined;
}

/**
 * Node registry and liveness shared through the cluster store (a Redis store; the in-process store
 * keeps `NodeRegistry`'s own synchronous path). The node routes write through the store and apply
 * the stored record to this replica's registry at once; every `periodMs` each replica sweeps
 * (`store.sweep()` hands each late node to one replica, which logs it as offline) and refreshes
 * its registry from `store.list()`, so a heartbeat sent to another replica shows here within one
 * period plus a round trip; a node the store stops listing is dropped here 3 intervals later.
 */
export class ClusterNodeSync {
  readonly #registry: NodeRegistry;
  readonly #store: NodeLivenessStore;
  readonly #logger: Log;
  readonly #periodMs: number;
  readonly #clock: Clock;
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<void> | undefined;
  #closed = false;
  /** Bumped by each write here: a refresh that overlapped one does not drop nodes it did not list. */
  #writes = 0;
  /**
   * Nodes this registry has that the store stopped listing, since when (ms). They are dropped after
   * 3 heartbeat intervals, not at once: a deregistered node is gone from the store for good, but a
   * store that restarted empty forgets live nodes too, which register again on their next heartbeat
   * — meanwhile their pools and running tasks stay.
   */
  readonly #missingSince = new Map<string, number>();
  /**
   * When a refresh last failed (ms). A store that was unreachable (or restarted with its data) holds
   * every node's last heartbeat from before the outage: sweeping at once would take the outage for
   * missed heartbeats and abandon the nodes' running tasks. The sweep waits a whole offline limit
   * (3 intervals) after the last failure, the time every live node needs to heartbeat again.
   */
  #lastFailureAt = Number.NEGATIVE_INFINITY;
  /** Whether the last refresh failed (logged once per outage). */
  #failing = false;

  constructor({ registry, store, logger, periodMs, clock }: ClusterNodeSyncOptions) {
    this.#registry = registry;
    this.#clock = clock ?? systemClock;
    this.#store = store;
    this.#logger = logger;
    this.#periodMs = periodMs ?? Math.max(10, Math.floor(registry.heartbeatIntervalMs / 4));
  }

  /**
   * Starts the sweep-and-refresh loop. Resolves once the first refresh is done (or failed, which is
   * logged): a replica that starts places on the cluster's nodes from its first request.
   */
  start(): Promise<void> {
    if (this.#closed || this.#timer !== undefined || this.#running !== undefined) return Promise.resolve();
    return this.#loop();
  }

  async register(req: NodeRegisterRequest): Promise<NodeAck> {
    this.#writes += 1;
    this.#registry.applyStored(await this.#store.register(req), true);
    return { next_heartbeat_ms: this.#registry.heartbeatIntervalMs };
  }

  /** Undefined when the cluster does not know the node (it must register again). */
  async heartbeat(nodeId: string, req: HeartbeatRequest): Promise<NodeAck | undefined> {
    this.#writes += 1;
    const sentAt = Date.parse(req.timestamp);
    const applied = await this.#store.heartbeat(
      nodeId,
      req.pools,
      Number.isNaN(sentAt) ? undefined : sentAt,
      req.memory,
    );
    if (applied === undefined) return undefined;
    // The record as stored: last seen is decided on the store's clock.
    const stored = await this.#store.get(nodeId);
    if (stored !== undefined) this.#registry.applyStored(stored, true);
    return { next_heartbeat_ms: this.#registry.heartbeatIntervalMs };
  }

  async deregister(nodeId: string): Promise<boolean> {
    this.#writes += 1;
    const removed = await this.#store.deregister(nodeId);
    this.#registry.deregister(nodeId, removed);
    return removed;
  }

  /** One sweep and refresh; rejects when the store does (the loop logs it). */
  async refresh(): Promise<void> {
    const writes = this.#writes;
    const graceMs = 3 * this.#registry.heartbeatIntervalMs;
    const swept = new Set(this.#clock.now() - this.#lastFailureAt > graceMs ? await this.#store.sweep() : []);
    const nodes = await this.#store.list();
    if (this.#closed) return;
    // A register or deregister here overlapped the list: it may show what that write replaced.
    const overlapped = writes !== this.#writes;
    for (const n of nodes)
      if (!overlapped || swept.has(n.request.node_id)) this.#registry.applyStored(n, swept.has(n.request.node_id));
    if (overlapped) return;
    const listed = new Set(nodes.map((n) => n.request.node_id));
    for (const id of this.#missingSince.keys()) if (listed.has(id)) this.#missingSince.delete(id);
    const now = this.#clock.now();
    for (const id of this.#registry.nodeIds()) {
      if (listed.has(id)) continue;
      const since = this.#missingSince.get(id);
      if (since === undefined) this.#missingSince.set(id, now);
      else if (now - since > graceMs) {
        this.#missingSince.delete(id);
        this.#registry.deregister(id, false);
      }
    }
  }

  /** Stops the loop and waits for a refresh in flight. Idempotent. */
  async close(): Promise<void> {
    this.#closed = true;
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
    await this.#running;
  }

  #loop(): Promise<void> {
    this.#timer = undefined;
    const running = this.refresh().then(
      () => {
        if (this.#failing)
          this.#logger.info({ human: 'Node records are read from the cluster store again' }, 'node refresh recovered');
        this.#failing = false;
      },
      (err: unknown) => {
        this.#lastFailureAt = this.#clock.now();
        if (!this.#failing)
          this.#logger.warn(
            { err, human: 'Cannot read node records from the cluster store; pool views here keep their last state' },
            'node refresh failed',
          );
        this.#failing = true;
      },
    );
    this.#running = running;
    void running.then(() => {
      this.#running = undefined;
      if (this.#closed) return;
      this.#timer = setTimeout(() => void this.#loop(), this.#periodMs);
      this.#timer.unref();
    });
    return running;
  }
}
