import type { Clock, Log } from '@llama-orch/daemon-support';
import type { CatalogModelEntry, CatalogStore } from '../store/catalog-store.js';
import { idleSince, poolsOfEntry } from './eviction.js';
import { isCopy, isStaticPool, type Fleet, type FleetPool } from './fleet.js';
import type { ModelLoads } from './model-loads.js';

export interface IdleUnloadsOptions {
  catalog: Pick<CatalogStore, 'list'>;
  fleet: Pick<Fleet, 'pools'>;
  loads: Pick<ModelLoads, 'unloadCopy'>;
  clock: Clock;
  logger: Log;
  /** Whether this replica sweeps: one replica does (the cluster's leader; always in one process). */
  leader: () => boolean;
  /** Sweep period, ms. */
  everyMs: number;
  /** Told of each copy unloaded, so a task that raced in waits for the model (room-waits.ts). */
  gone?: (entry: CatalogModelEntry) => void;
}

/** How long an unload asked of a node keeps its copy out of the sweep (its node drains and removes it long before). */
const ASKED_MEMORY_MS = 60_000;

export type IdleUnloadsState = 'idle' | 'running' | 'closed';

/**
 * Unloads the copies of catalog models idle longer than their `idle_ttl_s` (spec 67, Unloads):
 * never below the model's pin (static pools count as copies), never a copy with a slot leased or
 * still loading, the longest idle first. One replica sweeps, the leader, so two replicas never
 * take a model below its pin by each unloading another copy at once.
 */
export class IdleUnloads {
  readonly #o: IdleUnloadsOptions;
  #state: IdleUnloadsState = 'idle';
  #timer: NodeJS.Timeout | undefined;
  #sweeping: Promise<unknown> | undefined;
  /**
   * Copies this sweep asked to unload, with when: a heartbeat that crossed the node's answer may
   * list one as serving again for a moment, and it must not be asked twice.
   */
  readonly #asked = new Map<string, number>();

  constructor(options: IdleUnloadsOptions) {
    this.#o = options;
  }

  get state(): IdleUnloadsState {
    return this.#state;
  }

  start(): void {
    if (this.#state !== 'idle') return;
    this.#state = 'running';
    this.#timer = setInterval(() => {
      this.#sweeping ??= this.sweep()
        .catch((err: unknown) => this.#o.logger.warn({ err }, 'idle unload sweep failed'))
        .finally(() => {
          this.#sweeping = undefined;
        });
    }, this.#o.everyMs);
    this.#timer.unref();
  }

  /** One pass; resolves with the pools it asked to unload (`node/pool`). */
  async sweep(): Promise<string[]> {
    if (this.#state === 'closed' || !this.#o.leader()) return [];
    const now = this.#o.clock.now();
    const pools = this.#o.fleet.pools();
    const unloaded: string[] = [];
    for (const [key, at] of this.#asked) if (now - at > ASKED_MEMORY_MS) this.#asked.delete(key);
    for (const entry of await this.#o.catalog.list()) {
      const ttlMs = entry.policy.idle_ttl_s * 1000;
      if (ttlMs === 0) continue;
      const mine = poolsOfEntry(entry, pools);
      const spare = mine.filter(isCopy).length - entry.policy.pin;
      const expired = mine
        .filter((p) => isIdleCatalogCopy(p) && now - (idleSince(p) as number) >= ttlMs)
        .sort((a, b) => (idleSince(a) as number) - (idleSince(b) as number))
        .slice(0, Math.max(0, spare));
      for (const p of expired) {
        const key = `${p.node_id}/${p.pool_id}`;
        if (this.#asked.has(key)) continue;
        const idleS = Math.round((now - (idleSince(p) as number)) / 1000);
        if (await this.#o.loads.unloadCopy(p, 0, `idle ${idleS} s (idle_ttl_s ${entry.policy.idle_ttl_s})`, 'idle')) {
          this.#asked.set(key, now);
          this.#o.gone?.(entry);
          unloaded.push(key);
        }
      }
    }
    return unloaded;
  }

  /** Stops sweeping and waits for a sweep in progress. Idempotent. */
  async close(): Promise<void> {
    this.#state = 'closed';
    clearInterval(this.#timer);
    await this.#sweeping;
  }
}

function isIdleCatalogCopy(p: FleetPool): boolean {
  return isCopy(p) && !isStaticPool(p) && p.state === 'ready' && idleSince(p) !== undefined;
}
