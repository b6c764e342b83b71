import type { Clock, Log } from '@llama-orch/daemon-support';
import type { CatalogStore } from '../store/catalog-store.js';
import { poolKey, type Fleet, type FleetPool } from './fleet.js';
import type { LoadEnding } from './model-events.js';

/** A load this replica started, followed until its pool is ready, failed or gone. */
export interface FollowedLoad {
  /** Catalog id of the model. */
  readonly id: string;
  /** The load claim's owner (this replica's). */
  readonly owner: string;
  readonly node_id: string;
  readonly pool_id: string;
}

/**
 * A followed load's state: `accepted` (the node said 202; its heartbeats do not list the pool yet)
 * → `preparing` (listed, provisioning or starting) → ended: `ready`, `failed` (recorded in the
 * catalog), `vanished` (gone once listed: unloaded or its node left), `unreported` (never listed
 * within `reportWithinMs`: recorded as a failure).
 */
type Phase = 'accepted' | 'preparing';
type Ending = LoadEnding;

interface Followed extends FollowedLoad {
  phase: Phase;
  readonly acceptedAt: number;
  renewedAt: number;
}

export interface LoadWatcherOptions {
  catalog: CatalogStore;
  fleet: Fleet;
  clock: Clock;
  logger: Log;
  /** The claim's ttl; it is renewed every third of it while the pool prepares. */
  claimTtlMs: number;
  reportWithinMs: number;
  /** Called once per followed load when it ends (`error`: why it failed). */
  onEnd?: (load: FollowedLoad, ending: LoadEnding, error: string | undefined) => void;
}

/**
 * Follows the loads this replica started through the fleet's reports (each heartbeat, and a timer
 * for a node that goes silent): keeps their load claims alive while the pool prepares, gives them
 * back when it is ready or failed, and records a failed load's error in the catalog, so every
 * replica lists the model `failed` with why even after the node removed the pool.
 */
export class LoadWatcher {
  readonly #o: LoadWatcherOptions;
  readonly #loads = new Map<string, Followed>();
  #unsubscribe: (() => void) | undefined;
  #timer: NodeJS.Timeout | undefined;
  /** One check at a time; a change during a check asks for one more. */
  #checking: Promise<void> | undefined;
  #again = false;
  #closed = false;

  constructor(options: LoadWatcherOptions) {
    this.#o = options;
  }

  /** Loads followed now (for tests and the close). */
  get size(): number {
    return this.#loads.size;
  }

  follow(load: FollowedLoad): void {
    if (this.#closed) return;
    const now = this.#o.clock.now();
    this.#loads.set(poolKey(load), { ...load, phase: 'accepted', acceptedAt: now, renewedAt: now });
    this.#unsubscribe ??= this.#o.fleet.subscribe(() => this.#check());
    if (this.#timer === undefined) {
      // For a node that accepted and then went silent: no heartbeat would ever end the wait.
      this.#timer = setInterval(() => this.#check(), Math.max(50, Math.floor(this.#o.claimTtlMs / 3)));
      this.#timer.unref();
    }
  }

  /** Stops following (claims lapse on their own) and waits for a check in progress. Idempotent. */
  async close(): Promise<void> {
    this.#closed = true;
    this.#loads.clear();
    this.#stop();
    await this.#checking;
  }

  #stop(): void {
    this.#unsubscribe?.();
    this.#unsubscribe = undefined;
    if (this.#timer !== undefined) clearInterval(this.#timer);
    this.#timer = undefined;
  }

  #check(): void {
    if (this.#checking !== undefined) {
      this.#again = true;
      return;
    }
    this.#checking = this.#checkAll().finally(() => {
      this.#checking = undefined;
      if (this.#again && !this.#closed) {
        this.#again = false;
        this.#check();
      }
    });
  }

  async #checkAll(): Promise<void> {
    const pools = new Map(this.#o.fleet.pools().map((p) => [poolKey(p), p] as const));
    for (const [key, load] of [...this.#loads]) {
      const ending = await this.#step(load, pools.get(key));
      if (ending !== undefined) this.#loads.delete(key);
    }
    if (this.#loads.size === 0) this.#stop();
  }

  /** One look at a followed load; its ending once it has one. */
  async #step(load: Followed, pool: FleetPool | undefined): Promise<Ending | undefined> {
    const now = this.#o.clock.now();
    if (pool === undefined) {
      if (load.phase === 'preparing') return this.#end(load, 'vanished');
      if (now - load.acceptedAt <= this.#o.reportWithinMs) return undefined;
      const error = `node ${load.node_id} accepted pool ${load.pool_id} but did not report it within ${Math.round(this.#o.reportWithinMs / 1000)} s`;
      return this.#end(load, 'unreported', error);
    }
    if (pool.state === 'failed')
      return this.#end(
        load,
        'failed',
        pool.snapshot.last_error ?? `pool ${load.pool_id} on node ${load.node_id} failed`,
      );
    if (pool.state === 'ready' && !pool.draining) return this.#end(load, 'ready');
    if (pool.state !== 'provisioning' && pool.state !== 'starting') return this.#end(load, 'vanished');
    load.phase = 'preparing';
    if (now - load.renewedAt >= this.#o.claimTtlMs / 3) {
      load.renewedAt = now;
      await this.#store('renew the load claim', load, () =>
        this.#o.catalog.claimLoad(load.id, load.owner, this.#o.claimTtlMs),
      );
    }
    return undefined;
  }

  async #end(load: Followed, ending: Ending, error?: string): Promise<Ending> {
    if (error !== undefined) {
      await this.#store('record the failed load', load, () => this.#o.catalog.recordLoadError(load.id, error));
      this.#o.logger.warn(
        {
          model: load.id,
          node_id: load.node_id,
          pool_id: load.pool_id,
          ending,
          error,
          human: `Loading model '${load.id}' on node ${load.node_id} failed: ${error}`,
        },
        'model load failed',
      );
    } else {
      this.#o.logger.info(
        {
          model: load.id,
          node_id: load.node_id,
          pool_id: load.pool_id,
          ending,
          human:
            ending === 'ready'
              ? `Model '${load.id}' is loaded on node ${load.node_id} (pool ${load.pool_id})`
              : `Pool ${load.pool_id} loading model '${load.id}' left node ${load.node_id} before it was ready`,
        },
        'model load ended',
      );
    }
    this.#o.onEnd?.(load, ending, error);
    await this.#store('release the load claim', load, () => this.#o.catalog.releaseLoad(load.id, load.owner));
    return ending;
  }

  /** A store call of the watcher: a failure is logged, not thrown (a claim lapses on its own; the pool's state still shows a failure). */
  async #store(what: string, load: FollowedLoad, call: () => Promise<unknown>): Promise<void> {
    try {
      await call();
    } catch (err) {
      this.#o.logger.warn({ err, model: load.id, pool_id: load.pool_id }, `catalog: could not ${what}`);
    }
  }
}
