import { randomUUID } from 'node:crypto';
import { ErrorEnvelopeSchema, type PoolLoadRequest } from '@llama-orch/contracts';
import type { Clock, Log } from '@llama-orch/daemon-support';
import {
  ConflictError,
  InsufficientMemoryError,
  InternalError,
  NoLoadingNodeError,
  ModelLoadFailedError,
  ModelNotAvailableError,
  NotFoundError,
  PoolUnavailableError,
} from '../errors.js';
import type { CatalogModelEntry, CatalogStore } from '../store/catalog-store.js';
import { groupModels, groupOf } from './cluster-models.js';
import {
  isCopy,
  isLoading,
  isStaticPool,
  poolKey,
  poolNames,
  type Fleet,
  type FleetNode,
  type FleetPool,
  type NodeLoadClient,
} from './fleet.js';
import { loadCandidates, loadPoolId } from './load-placement.js';
import { modelNotFound } from './model-not-found.js';
import { LoadWatcher } from './load-watcher.js';
import { evictionVictim, poolsOfEntry } from './eviction.js';
import { ModelEvents, type ModelEventListener, type UnloadCause } from './model-events.js';

export interface ModelLoadsOptions {
  catalog: CatalogStore;
  fleet: Fleet;
  nodes: NodeLoadClient;
  /** This replica's id: a load claim's owner is `<replica id>:<random>`, so the store tells who loads. */
  replicaId: string;
  logger: Log;
  clock: Clock;
  /**
   * How long a load claim lives without renewal, ms. The replica that started a load renews it
   * while the pool prepares and releases it once the pool is ready or failed; a replica that dies
   * lets it lapse (the pool, listed by then, still shows the load to every replica).
   */
  claimTtlMs: number;
  /** How long a node may take to report a pool it accepted, ms; later, the load counts as failed. @default claimTtlMs */
  reportWithinMs?: number;
  /** Told when a copy is evicted, so the model's queued tasks can wait for it (room-waits.ts). */
  evicted?: (entry: CatalogModelEntry) => void;
  /** A new pool's id for a ref. @default `<model-slug>-<6 random>` (load-placement.ts) */
  poolId?: (ref: string) => string;
}

export type LoadOutcome =
  /** This call asked `node_id`, which accepted pool `pool_id` (it prepares it now). */
  | { readonly kind: 'started'; readonly node_id: string; readonly pool_id: string }
  /** A load was already under way (a pool preparing the model, or another caller's claim): nothing was asked. */
  | { readonly kind: 'in_flight'; readonly pools: readonly string[]; readonly claimedBy?: string };

export interface UnloadOutcome {
  /** Pools (`node/pool`) whose nodes accepted the unload: they drain, then stop. */
  readonly unloading: readonly string[];
  /** Pools whose nodes refused, with why. */
  readonly refused: readonly string[];
}

export type ModelLoadsState = 'running' | 'closed';

/** Copies evicted for one load at most: each round frees one copy and asks the node again. */
const MAX_EVICTIONS_PER_LOAD = 3;
/**
 * An evicted copy is idle, so its drain has nothing to wait for; a task that raced in (placed after
 * the last report said idle) still finishes, as on a swap: work in flight is never cut short.
 */
const EVICTION_DEADLINE_MS = 60_000;

/**
 * Loads and unloads of catalog models (.specs/67-models-on-demand.md): the node-facing half of the
 * fleet catalog. A load takes the model's load claim in the store first, so however many replicas
 * ask at once, one asks a node; asking while a load is under way is a no-op that answers the load
 * in flight. Node choice is load-placement.ts's; the pool's progress is followed by LoadWatcher,
 * which records a failed load in the catalog.
 */
export class ModelLoads {
  readonly #catalog: CatalogStore;
  readonly #fleet: Fleet;
  readonly #nodes: NodeLoadClient;
  readonly #replicaId: string;
  readonly #logger: Log;
  readonly #claimTtlMs: number;
  readonly #reportWithinMs: number;
  readonly #evicted: (entry: CatalogModelEntry) => void;
  /** The memory a copy of each model (by id) reported before it went: its need when none is listed. */
  readonly #needs = new Map<string, number>();
  readonly #poolId: (ref: string) => string;
  readonly #watcher: LoadWatcher;
  readonly #clock: Clock;
  readonly #events = new ModelEvents();
  /** Loads this replica is deciding now, by model id and node: a second ask gets the same answer, with no store call. */
  readonly #deciding = new Map<string, Promise<LoadOutcome>>();
  #state: ModelLoadsState = 'running';

  constructor(o: ModelLoadsOptions) {
    this.#catalog = o.catalog;
    this.#fleet = o.fleet;
    this.#nodes = o.nodes;
    this.#replicaId = o.replicaId;
    this.#logger = o.logger;
    this.#claimTtlMs = o.claimTtlMs;
    this.#reportWithinMs = o.reportWithinMs ?? o.claimTtlMs;
    this.#evicted = o.evicted ?? (() => undefined);
    this.#poolId = o.poolId ?? ((ref) => loadPoolId(ref));
    this.#clock = o.clock;
    this.#watcher = new LoadWatcher({
      catalog: o.catalog,
      fleet: o.fleet,
      clock: o.clock,
      logger: o.logger,
      claimTtlMs: o.claimTtlMs,
      reportWithinMs: this.#reportWithinMs,
      onEnd: (l, ending, error) =>
        this.#events.emit({
          type: 'load-ended',
          at: this.#clock.now(),
          model: l.id,
          nodeId: l.node_id,
          poolId: l.pool_id,
          ending,
          error,
        }),
    });
  }

  /** Loads started and ended and copies unloading, as this replica does them (the dashboard's feed). Returns the unsubscribe function. */
  subscribe(listener: ModelEventListener): () => void {
    return this.#events.subscribe(listener);
  }

  get state(): ModelLoadsState {
    return this.#state;
  }

  /**
   * Starts one more copy of a catalog model (by id or alias, or its entry as read), on `node` or on
   * the node load-placement.ts chooses; or answers the load already in flight. Rejects with
   * MODEL_NOT_FOUND (no such model), CONFLICT (not a catalog entry, `max_loaded` copies already,
   * a node that loads nothing on request), INSUFFICIENT_MEMORY (no node has room), MODEL_LOAD_FAILED
   * (every node asked refused for another reason), NOT_FOUND / POOL_UNAVAILABLE (the node named is
   * unknown / not online), STORE_UNAVAILABLE.
   */
  async load(model: string | CatalogModelEntry, opts: { node?: string | undefined } = {}): Promise<LoadOutcome> {
    this.#open();
    const entry = typeof model === 'string' ? await this.#entry(model) : model;
    const key = `${entry.id}\u0000${opts.node ?? ''}`;
    const deciding = this.#deciding.get(key);
    if (deciding !== undefined) return deciding;
    const run = this.#load(entry, opts.node).finally(() => this.#deciding.delete(key));
    this.#deciding.set(key, run);
    return run;
  }

  /**
   * Load on first request (spec 67): the name the fleet's pools list the catalog model under, once
   * a copy is serving or being prepared. Starts a load when none is (or answers the one in flight,
   * on any replica), then waits for the node to report the pool (it heartbeats at once on a new
   * pool); the task then waits in the queue like any task of a preparing pool. Rejects as `load`
   * does, and with MODEL_NOT_AVAILABLE (retriable) when no node lists the pool within `waitMs`.
   */
  async whenServable(entry: CatalogModelEntry, waitMs: number): Promise<string> {
    const listed = this.#listedName(entry);
    if (listed !== undefined) return listed;
    await this.load(entry);
    return this.#untilListed(entry, waitMs);
  }

  /** A name of the entry that a copy (ready or preparing) lists. */
  #listedName(entry: CatalogModelEntry): string | undefined {
    for (const p of this.#poolsOf(entry)) {
      if (!isCopy(p)) continue;
      const names = poolNames(p);
      return [entry.ref, ...entry.aliases].find((n) => names.includes(n));
    }
    return undefined;
  }

  async #untilListed(entry: CatalogModelEntry, waitMs: number): Promise<string> {
    const name = await this.#whenFleet(() => this.#listedName(entry), waitMs);
    if (name !== undefined) return name;
    throw new ModelNotAvailableError(
      `model '${entry.id}' is being loaded, but no node reported its pool within ${waitMs} ms`,
      { retryAfterMs: 1000 },
    );
  }

  /** `found()`'s first defined answer, checked now and on each change of the fleet; undefined after `waitMs`. */
  #whenFleet<T>(found: () => T | undefined, waitMs: number): Promise<T | undefined> {
    return new Promise<T | undefined>((resolve) => {
      const check = (): void => {
        const value = found();
        if (value !== undefined) done(value);
      };
      const unsubscribe = this.#fleet.subscribe(check);
      const timer = setTimeout(() => done(undefined), waitMs);
      const done = (value: T | undefined): void => {
        clearTimeout(timer);
        unsubscribe();
        resolve(value);
      };
      check();
    });
  }

  /**
   * Unloads the model's copies loaded on demand (all, or those on `node`), never below its `pin`:
   * idle copies first, then loading ones, then busy ones; failed catalog pools always go. Each
   * node drains its pool (in-flight work may run `deadlineMs`) and removes it. Rejects with
   * MODEL_NOT_FOUND, CONFLICT (nothing loaded on demand, only static pools, or the pin) or, when
   * every node refused, CONFLICT / POOL_UNAVAILABLE.
   */
  async unload(name: string, opts: { node?: string | undefined; deadlineMs?: number } = {}): Promise<UnloadOutcome> {
    this.#open();
    const entry = await this.#catalog.get(name);
    const all = this.#fleet.pools();
    const group = groupOf(groupModels(entry === undefined ? [] : [entry], all), entry?.id ?? name);
    if (group === undefined) throw modelNotFound(name);
    const id = group.id;
    const on = opts.node === undefined ? '' : ` on node ${opts.node}`;
    const here = opts.node === undefined ? group.pools : group.pools.filter((p) => p.node_id === opts.node);
    const removable = here.filter(
      (p) =>
        !isStaticPool(p) &&
        p.node_state !== 'offline' &&
        p.state !== 'stopped' &&
        p.state !== 'draining' &&
        !p.draining,
    );
    if (removable.length === 0) {
      if (here.some(isStaticPool))
        throw new ConflictError(
          `model '${id}' is served${on} by static pools of the node's config; they are not unloaded`,
        );
      throw new ConflictError(`no copy of model '${id}' loaded on demand${on} is left to unload`);
    }
    const pin = entry?.policy.pin ?? 0;
    const copies = group.pools.filter(isCopy).length;
    const live = removable.filter(isCopy).sort(unloadOrder);
    const targets = [...removable.filter((p) => !isCopy(p)), ...live.slice(0, Math.max(0, copies - pin))];
    if (targets.length === 0)
      throw new ConflictError(
        `model '${id}' is pinned: ${copies} cop${copies === 1 ? 'y' : 'ies'} loaded, pin ${pin}; unloading would leave fewer than the pin`,
      );
    const deadlineMs = opts.deadlineMs ?? 30_000;
    const unloading: string[] = [];
    const refused: string[] = [];
    let conflict = false;
    for (const p of targets) {
      const answer = await this.#unloadOne(
        p,
        deadlineMs,
        'operator',
        `asked by an operator (deadline ${deadlineMs} ms)`,
      );
      if (answer.ok) unloading.push(poolKey(p));
      else {
        conflict ||= answer.code === 'CONFLICT';
        refused.push(`${poolKey(p)}: ${answer.message}`);
      }
    }
    this.#logger.info(
      {
        model: id,
        unloading,
        refused,
        human: `Unload of model '${id}': ${unloading.length} pool(s) draining${refused.length > 0 ? `, refused: ${refused.join('; ')}` : ''}`,
      },
      'model unload',
    );
    if (unloading.length === 0) {
      const message = `no node accepted the unload of model '${id}': ${refused.join('; ')}`;
      throw conflict ? new ConflictError(message) : new PoolUnavailableError(message);
    }
    return { unloading, refused };
  }

  /**
   * Unloads one copy the catalog loaded (an idle copy past its ttl, an eviction, a swap: `cause`;
   * `why` in words, for the log line and the dashboard's feed): its node drains and removes it;
   * nothing new is placed on it from here on. False (logged) when the node refused or is gone.
   */
  async unloadCopy(
    p: FleetPool,
    deadlineMs: number,
    why: string,
    cause: Exclude<UnloadCause, 'operator'>,
  ): Promise<boolean> {
    const answer = await this.#unloadOne(p, deadlineMs, cause, why);
    const model = p.models[0] ?? '?';
    this.#logger.info(
      {
        model,
        node_id: p.node_id,
        pool_id: p.pool_id,
        reason: why,
        ...(answer.ok ? {} : { refused: answer.message }),
        human: answer.ok
          ? `Unloading model '${model}' from pool ${poolKey(p)}: ${why}`
          : `Could not unload model '${model}' from pool ${poolKey(p)} (${why}): ${answer.message}`,
      },
      answer.ok ? 'model copy unloading' : 'model copy unload refused',
    );
    return answer.ok;
  }

  async #unloadOne(
    p: FleetPool,
    deadlineMs: number,
    cause: UnloadCause,
    reason: string,
  ): Promise<{ ok: true } | { ok: false; code?: string | undefined; message: string }> {
    const node = this.#fleet.nodes().find((n) => n.node_id === p.node_id);
    if (node === undefined) return { ok: false, message: 'node not registered' };
    const model = p.models[0];
    const bytes = p.snapshot.memory_bytes;
    if (model !== undefined && bytes !== undefined && bytes > 0) this.#needs.set(model, bytes);
    const answer = await this.#ask(() => this.#nodes.unloadPool(node.address, p.pool_id, deadlineMs));
    if (answer.ok) {
      this.#events.emit({
        type: 'unloading',
        at: this.#clock.now(),
        model: p.models[0] ?? '?',
        nodeId: p.node_id,
        poolId: p.pool_id,
        cause,
        reason,
      });
      this.#fleet.markDraining(p.node_id, p.pool_id);
    }
    return answer;
  }

  /** Stops following loads (their claims lapse on their own). Idempotent. */
  close(): Promise<void> {
    this.#state = 'closed';
    this.#events.clear();
    return this.#watcher.close();
  }

  async #load(entry: CatalogModelEntry, node: string | undefined): Promise<LoadOutcome> {
    // A node named by the caller is checked first: a wrong name is wrong whatever else is going on.
    const named = node === undefined ? undefined : this.#namedNode(node);
    const pools = this.#poolsOf(entry);
    const loading = pools.filter(isLoading);
    if (loading.length > 0) return { kind: 'in_flight', pools: loading.map(poolKey) };
    if (entry.load !== undefined) return { kind: 'in_flight', pools: [], claimedBy: entry.load.owner };
    const copies = pools.filter(isCopy);
    const max = entry.policy.max_loaded;
    if (copies.length >= max)
      throw new ConflictError(
        `model '${entry.id}' has ${copies.length} cop${copies.length === 1 ? 'y' : 'ies'} loaded (${copies.map(poolKey).join(', ')}); its max_loaded is ${max}`,
      );
    // No node with room by the fleet's figures: eviction may make some (below), so go on to the claim.
    let candidates: readonly FleetNode[] = [];
    let noRoom: InsufficientMemoryError | undefined;
    try {
      candidates = named === undefined ? this.#candidates(entry, pools) : [named];
    } catch (err) {
      if (!(err instanceof InsufficientMemoryError) || this.#fleet.nodes().every((n) => n.memory === undefined))
        throw err;
      noRoom = err;
    }
    const owner = `${this.#replicaId}:${randomUUID().slice(0, 8)}`;
    const claim = await this.#catalog.claimLoad(entry.id, owner, this.#claimTtlMs);
    if (claim.kind === 'unknown') throw modelNotFound(entry.id);
    if (claim.kind === 'held') return { kind: 'in_flight', pools: [], claimedBy: claim.owner };
    let started: LoadOutcome | undefined;
    try {
      try {
        if (noRoom !== undefined) throw noRoom;
        started = await this.#start(entry, candidates, owner);
      } catch (err) {
        if (!(err instanceof InsufficientMemoryError) || named !== undefined) throw err;
        started = await this.#evictAndStart(entry, owner, err);
      }
      return started;
    } finally {
      // Only a started load keeps the claim (the watcher gives it back once the pool is ready or failed).
      if (started === undefined) await this.#release(entry.id, owner);
    }
  }

  async #start(entry: CatalogModelEntry, candidates: readonly FleetNode[], owner: string): Promise<LoadOutcome> {
    const refusals: string[] = [];
    let memoryOnly = true;
    for (const node of candidates) {
      const body: PoolLoadRequest = {
        pool_id: this.#poolId(entry.ref),
        model: entry.ref,
        ...(entry.sha256 !== undefined ? { sha256: entry.sha256 } : {}),
        aliases: [...entry.aliases],
        ctx: entry.policy.ctx,
        slots: entry.policy.slots,
        gpu: entry.policy.gpu,
        serve: entry.policy.serve,
      };
      const answer = await this.#ask(() => this.#nodes.loadPool(node.address, body));
      if (answer.ok) {
        this.#logger.info(
          {
            model: entry.id,
            node_id: node.node_id,
            pool_id: body.pool_id,
            human: `Loading model '${entry.id}' on node ${node.node_id} as pool ${body.pool_id}`,
          },
          'model load started',
        );
        this.#events.emit({
          type: 'load-started',
          at: this.#clock.now(),
          model: entry.id,
          nodeId: node.node_id,
          poolId: body.pool_id,
        });
        await this.#clearError(entry.id);
        this.#watcher.follow({ id: entry.id, owner, node_id: node.node_id, pool_id: body.pool_id });
        return { kind: 'started', node_id: node.node_id, pool_id: body.pool_id };
      }
      memoryOnly &&= answer.code === 'INSUFFICIENT_MEMORY';
      refusals.push(`${node.node_id}: ${answer.message}`);
    }
    this.#logger.warn(
      { model: entry.id, refusals, human: `No node accepted the load of model '${entry.id}': ${refusals.join('; ')}` },
      'model load refused',
    );
    if (memoryOnly)
      throw new InsufficientMemoryError(`no node has room for model '${entry.id}' now: ${refusals.join('; ')}`);
    throw new ModelLoadFailedError(`no node accepted the load of model '${entry.id}': ${refusals.join('; ')}`);
  }

  /**
   * Makes room for `entry` by unloading idle copies of other models (eviction.ts chooses; never a
   * busy, loading or pinned one), one at a time, each time asking the victim's node again once the
   * copy is gone. Rejects with `refused` (and why nothing more could go) when no copy may go.
   */
  async #evictAndStart(
    entry: CatalogModelEntry,
    owner: string,
    refused: InsufficientMemoryError,
  ): Promise<LoadOutcome> {
    let last = refused;
    for (let round = 0; round < MAX_EVICTIONS_PER_LOAD; round += 1) {
      const entries = await this.#catalog.list();
      const victim = evictionVictim(entry, entries, this.#fleet.pools(), this.#fleet.nodes());
      if (victim === undefined) break;
      if (!(await this.unloadCopy(victim, EVICTION_DEADLINE_MS, `evicted to make room for '${entry.id}'`, 'eviction')))
        break;
      const victimEntry = entries.find((e) => poolsOfEntry(e, [victim]).length > 0);
      if (victimEntry !== undefined) this.#evicted(victimEntry);
      await this.#untilGone(victim, this.#reportWithinMs);
      const node = this.#fleet.nodes().find((n) => n.node_id === victim.node_id);
      if (node === undefined) break;
      try {
        return await this.#start(entry, [node], owner);
      } catch (err) {
        if (!(err instanceof InsufficientMemoryError)) throw err;
        last = err;
      }
    }
    throw new InsufficientMemoryError(`${last.message}; no idle copy of another model may be evicted for it`);
  }

  /** Resolves once the fleet no longer lists the pool (its node removed it), or after `waitMs`. */
  async #untilGone(p: FleetPool, waitMs: number): Promise<void> {
    const key = poolKey(p);
    await this.#whenFleet(() => (this.#fleet.pools().some((q) => poolKey(q) === key) ? undefined : true), waitMs);
  }

  /** A node the caller named: asked alone (it decides whether the model fits). */
  #namedNode(node: string): FleetNode {
    const n = this.#fleet.nodes().find((x) => x.node_id === node);
    if (n === undefined) throw new NotFoundError(`node '${node}' is not registered`);
    if (n.memory === undefined)
      throw new ConflictError(`node '${node}' loads no model on request (its config has no on_demand memory)`);
    if (n.state !== 'online') throw new PoolUnavailableError(`node '${node}' is ${n.state}`);
    return n;
  }

  /** The nodes to ask, in order (load-placement.ts). */
  #candidates(entry: CatalogModelEntry, pools: readonly FleetPool[]): readonly FleetNode[] {
    const nodes = this.#fleet.nodes();
    const c = loadCandidates(nodes, pools, this.#needs.get(entry.id));
    if (c.onDemand === 0)
      throw new NoLoadingNodeError(
        `no online node loads models on request (none reports on-demand memory); model '${entry.id}' cannot be loaded`,
      );
    if (c.nodes.length === 0)
      throw new InsufficientMemoryError(
        `no node has room for model '${entry.id}' now${c.needBytes === undefined ? '' : ` (it takes ${c.needBytes} bytes)`}`,
      );
    return c.nodes;
  }

  /** One call to a node: accepted (2xx), or refused with its envelope's code and message, or unreachable. */
  async #ask(
    call: () => Promise<{ status: number; body: unknown }>,
  ): Promise<{ ok: true } | { ok: false; code?: string | undefined; message: string }> {
    let answer: { status: number; body: unknown };
    try {
      answer = await call();
    } catch (err) {
      return { ok: false, message: `unreachable: ${(err as Error).message}` };
    }
    if (answer.status >= 200 && answer.status < 300) return { ok: true };
    const envelope = ErrorEnvelopeSchema.safeParse(answer.body);
    return envelope.success
      ? { ok: false, code: envelope.data.code, message: `${envelope.data.code}: ${envelope.data.message}` }
      : { ok: false, message: `answered ${answer.status}` };
  }

  async #entry(name: string): Promise<CatalogModelEntry> {
    const entry = await this.#catalog.get(name);
    if (entry !== undefined) return entry;
    if (this.#fleet.pools().some((p) => poolNames(p).includes(name)))
      throw new ConflictError(
        `model '${name}' is not in the catalog: static pools serve it (register it with POST /v2/catalog/models to load copies on demand)`,
      );
    throw modelNotFound(name);
  }

  #poolsOf(entry: CatalogModelEntry): FleetPool[] {
    return poolsOfEntry(entry, this.#fleet.pools());
  }

  /** A load started: an earlier failure is history. Not fatal when the store does not answer (the pool's own state shows the load). */
  async #clearError(id: string): Promise<void> {
    try {
      await this.#catalog.recordLoadError(id, undefined);
    } catch (err) {
      this.#logger.warn({ err, model: id }, 'catalog: could not clear the last load error');
    }
  }

  /** Gives a claim back; when the store does not answer, the claim lapses on its own (logged). */
  async #release(id: string, owner: string): Promise<void> {
    try {
      await this.#catalog.releaseLoad(id, owner);
    } catch (err) {
      this.#logger.warn({ err, model: id, owner }, 'catalog: could not release a load claim; it lapses');
    }
  }

  #open(): void {
    if (this.#state !== 'running')
      throw new InternalError('orchestratord is shutting down; no model is loaded or unloaded', {
        retriable: true,
        retryAfterMs: 1000,
      });
  }
}

/** Idle copies first (longest idle first), then copies still loading, then busy ones. */
function unloadOrder(a: FleetPool, b: FleetPool): number {
  const rank = (p: FleetPool): number => (p.snapshot.idle_since !== undefined ? 0 : p.state !== 'ready' ? 1 : 2);
  const byRank = rank(a) - rank(b);
  if (byRank !== 0) return byRank;
  const since = (p: FleetPool): number => Date.parse(p.snapshot.idle_since ?? '') || 0;
  return since(a) - since(b);
}
