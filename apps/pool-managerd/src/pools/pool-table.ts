import type {
  PoolCapability,
  PoolOrigin,
  PoolSnapshot,
  PoolState,
  PoolStatus,
  ProvisioningProgress,
} from '@llama-orch/contracts';
import { PoolNotFoundError, PoolUnreadyError, ReplicaExhaustedError } from '../errors.js';
import type { BreakerState } from '../supervision/circuit-breaker.js';
import { procResidentBytes, type ResidentBytes } from '../support/process-memory.js';
import { committedBytes } from './memory-projection.js';
import { systemClock, type Clock } from '@llama-orch/daemon-support';
import { PoolStateMachine, type PoolOperation, type PoolStateChange } from './pool-state.js';

/** Engine identity known for a pool while an engine is bound. */
export interface EngineBinding {
  url: string;
  /** The engine's replica (`r0` for a managed pool; the handoff file's for an adopted engine). */
  replica_id: string;
  engine_version: string;
  engine_fingerprint?: string;
  /** llama-orch's llama.cpp patches the engine was built with (managed engines; absent: none or unknown). */
  engine_patches?: string[];
  slots_total: number;
  ctx: number;
  pid?: number;
  /** `managed` (spawned here) or `external` (adopted from a handoff file). */
  mode: 'managed' | 'external';
  /** What the engine serves; absent = what the pool was registered with. */
  capabilities?: PoolCapability[];
}

/** A held slot. `release()` is idempotent: a double release is harmless and never goes negative. */
export interface Lease {
  readonly poolId: string;
  readonly id: number;
  /** Aborted when the pool force-stops in-flight work (drain deadline, shutdown). */
  readonly signal: AbortSignal;
  release(): void;
}

interface PoolEntry {
  readonly id: string;
  readonly machine: PoolStateMachine;
  readonly managed: boolean;
  /** `catalog` for a pool loaded on request; undefined for the node's own (YAML or adopted). */
  readonly origin: PoolOrigin | undefined;
  engine: EngineBinding | undefined;
  models: string[];
  aliases: readonly string[];
  /** Known before an engine runs (an embeddings or reranking pool's config); the bound engine's win. */
  capabilities: readonly PoolCapability[] | undefined;
  deterministic: boolean;
  ctx: number;
  slotsTotal: number;
  leases: Map<number, AbortController>;
  restarts: number;
  breaker: BreakerState;
  lastError: string | undefined;
  progress: ProvisioningProgress | undefined;
  decodeTps: number;
  lastHeartbeat: Date | undefined;
  /** When the last lease was released with none left, or when it was first ready unused; undefined while one is held. */
  idleSince: Date | undefined;
  /** What its engine is projected to take, bytes (see memory-projection.ts); undefined until known. */
  projectedBytes: number | undefined;
}

export interface RegisterPoolOptions {
  /** Configured here (spawned and supervised) vs adopted from an external handoff. */
  managed: boolean;
  /** `catalog`: loaded on orchestratord's request (`POST /v2/pools`). @default the node's own */
  origin?: PoolOrigin;
  models: string[];
  /** Other names clients may use for the models served (the pool's configured `aliases`). @default [] */
  aliases?: readonly string[];
  /** What the pool serves before an engine says (from its config). @default unknown (chat and completion) */
  capabilities?: readonly PoolCapability[] | undefined;
  deterministic: boolean;
  ctx: number;
  slotsTotal: number;
  state?: PoolState;
  reason?: string;
}

export interface PoolTableOptions {
  /** Time of state changes and `idle_since`. @default systemClock */
  clock?: Clock;
  /** Reads an engine's resident memory (its `memory_bytes` once bound). @default /proc/<pid>/status VmRSS */
  residentBytes?: ResidentBytes;
}

/** Suggested client wait when no lease is possible, ms. */
export const UNREADY_RETRY_MS = 1000;

/** Weight of the newest decode-rate sample in the moving average. */
const TPS_ALPHA = 0.3;

/**
 * What pool-managerd knows about each of its pools right now: the lifecycle (one
 * {@link PoolStateMachine} per pool, the authority on state and operation), the bound engine,
 * slots and leases, errors and measured decode rate. It holds facts only; decisions live in the
 * pools and operations. Heartbeats, `/v2/pools` and the pool gauges read from here.
 *
 * `ready` is derived, never stored: state `ready` with an engine bound. `draining` is state
 * `draining`. Nothing is reported ready because a state alone says so.
 */
export class PoolTable {
  readonly #pools = new Map<string, PoolEntry>();
  readonly #listeners = new Set<(poolId: string, change: PoolStateChange | undefined) => void>();
  readonly #membership = new Set<(poolId: string, event: 'added' | 'removed') => void>();
  readonly #idleness = new Set<(poolId: string, idle: boolean) => void>();
  readonly #clock: Clock;
  readonly #residentBytes: ResidentBytes;
  #nextLeaseId = 1;

  constructor({ clock = systemClock, residentBytes = procResidentBytes }: PoolTableOptions = {}) {
    this.#clock = clock;
    this.#residentBytes = residentBytes;
  }

  /** Adds a pool; a second call with the same id returns false and changes nothing. */
  register(poolId: string, opts: RegisterPoolOptions): boolean {
    if (this.#pools.has(poolId)) return false;
    const machine = new PoolStateMachine(poolId, opts.state ?? 'provisioning', opts.reason, this.#clock);
    const entry: PoolEntry = {
      id: poolId,
      machine,
      managed: opts.managed,
      origin: opts.origin,
      engine: undefined,
      models: [...opts.models],
      aliases: Object.freeze([...(opts.aliases ?? [])]),
      capabilities: opts.capabilities,
      deterministic: opts.deterministic,
      ctx: opts.ctx,
      slotsTotal: opts.slotsTotal,
      leases: new Map(),
      restarts: 0,
      breaker: 'closed',
      lastError: undefined,
      progress: undefined,
      decodeTps: 0,
      lastHeartbeat: undefined,
      idleSince: undefined,
      projectedBytes: undefined,
    };
    machine.onChange((change) => {
      if (change.to !== 'provisioning') entry.progress = undefined;
      // Never used yet: idle since it could first take work.
      if (change.to === 'ready' && entry.idleSince === undefined && entry.leases.size === 0)
        entry.idleSince = change.at;
      this.#emit(poolId, change);
    });
    this.#pools.set(poolId, entry);
    this.#emit(poolId, undefined);
    for (const l of this.#membership) l(poolId, 'added');
    return true;
  }

  /**
   * Forgets a pool (an unloaded on-demand pool): it leaves every status, heartbeat and gauge. Leases
   * still held are released into the forgotten entry, harmlessly. Unknown ids are ignored.
   */
  remove(poolId: string): void {
    if (!this.#pools.delete(poolId)) return;
    this.#emit(poolId, undefined);
    for (const l of this.#membership) l(poolId, 'removed');
  }

  has(poolId: string): boolean {
    return this.#pools.has(poolId);
  }

  isManaged(poolId: string): boolean {
    return this.#get(poolId).managed;
  }

  ids(): string[] {
    return [...this.#pools.keys()].sort();
  }

  state(poolId: string): PoolState {
    return this.#get(poolId).machine.state;
  }

  /** The pool's lifecycle: state, reason and the operation holding it (pools and operations move it). */
  lifecycle(poolId: string): PoolStateMachine {
    return this.#get(poolId).machine;
  }

  /** The operation holding the pool, if any. */
  operation(poolId: string): PoolOperation | undefined {
    return this.#get(poolId).machine.operation;
  }

  /** Moves the pool's state; an illegal transition throws (see {@link PoolStateMachine}). */
  transition(poolId: string, to: PoolState, reason?: string): void {
    this.#get(poolId).machine.transition(to, reason);
  }

  /** Binds a healthy engine: the pool becomes live; it is ready once (or while) its state is `ready`. */
  bindEngine(poolId: string, engine: EngineBinding): void {
    const e = this.#get(poolId);
    e.engine = { ...engine };
    e.slotsTotal = engine.slots_total;
    e.ctx = engine.ctx;
    e.lastHeartbeat = new Date(this.#clock.now());
    this.#emit(poolId, undefined);
  }

  /** Engine gone (exit, stop, removed handoff): not live, not ready. Leases stay until released. */
  unbindEngine(poolId: string): void {
    const e = this.#get(poolId);
    if (e.engine === undefined) return;
    e.engine = undefined;
    this.#emit(poolId, undefined);
  }

  engine(poolId: string): EngineBinding | undefined {
    const e = this.#get(poolId);
    return e.engine !== undefined ? { ...e.engine } : undefined;
  }

  /** Refreshes the last time the engine was confirmed healthy (handoff ingest, health probe). */
  touch(poolId: string): void {
    this.#get(poolId).lastHeartbeat = new Date(this.#clock.now());
  }

  /** The models the pool serves (the first is its model), without building its whole status. */
  models(poolId: string): readonly string[] {
    return this.#get(poolId).models;
  }

  setModels(poolId: string, models: string[]): void {
    this.#get(poolId).models = [...new Set(models)];
    this.#emit(poolId, undefined);
  }

  setLastError(poolId: string, message: string | undefined): void {
    this.#get(poolId).lastError = message;
    this.#emit(poolId, undefined);
  }

  setProgress(poolId: string, progress: ProvisioningProgress | undefined): void {
    this.#get(poolId).progress = progress !== undefined ? { ...progress } : undefined;
  }

  /** What the pool's engine is projected to take, bytes (undefined: not known). */
  setProjectedBytes(poolId: string, bytes: number | undefined): void {
    this.#get(poolId).projectedBytes = bytes;
  }

  setBreaker(poolId: string, breaker: BreakerState): void {
    this.#get(poolId).breaker = breaker;
    this.#emit(poolId, undefined);
  }

  countRestart(poolId: string): void {
    this.#get(poolId).restarts += 1;
  }

  /** Folds one finished stream into the decode rate (tokens/s, exponential moving average). */
  recordDecode(poolId: string, tokens: number, decodeMs: number): void {
    if (tokens <= 0 || decodeMs <= 0) return;
    const e = this.#pools.get(poolId);
    if (e === undefined) return;
    const tps = (tokens * 1000) / decodeMs;
    e.decodeTps = e.decodeTps === 0 ? tps : e.decodeTps * (1 - TPS_ALPHA) + tps * TPS_ALPHA;
  }

  /**
   * Takes a slot. Throws {@link PoolUnreadyError} when the pool is not ready or is draining,
   * {@link ReplicaExhaustedError} when every slot is leased; {@link PoolNotFoundError} for an unknown pool.
   */
  lease(poolId: string): Lease {
    const e = this.#get(poolId);
    if (!isReady(e))
      throw new PoolUnreadyError(poolId, e.machine.reason ?? `state ${e.machine.state}`, UNREADY_RETRY_MS);
    if (e.leases.size >= e.slotsTotal) throw new ReplicaExhaustedError(poolId, e.slotsTotal, UNREADY_RETRY_MS);
    const id = this.#nextLeaseId++;
    const controller = new AbortController();
    e.leases.set(id, controller);
    const wasIdle = e.idleSince !== undefined;
    e.idleSince = undefined;
    this.#emit(poolId, undefined);
    if (wasIdle) for (const l of this.#idleness) l(poolId, false);
    let released = false;
    return {
      poolId,
      id,
      signal: controller.signal,
      release: () => {
        if (released) return;
        released = true;
        e.leases.delete(id);
        const nowIdle = e.leases.size === 0;
        if (nowIdle) e.idleSince = new Date(this.#clock.now());
        this.#emit(poolId, undefined);
        if (nowIdle) for (const l of this.#idleness) l(poolId, true);
      },
    };
  }

  activeLeases(poolId: string): number {
    return this.#pools.get(poolId)?.leases.size ?? 0;
  }

  /** Aborts every lease of the pool (their streams end); the holders still release them. */
  abortLeases(poolId: string, reason: string): void {
    for (const c of this.#get(poolId).leases.values()) c.abort(new Error(reason));
  }

  status(poolId: string): PoolStatus {
    const e = this.#get(poolId);
    const leases = e.leases.size;
    const ready = isReady(e);
    const state = e.machine.state;
    return {
      pool_id: e.id,
      state,
      ...(e.machine.reason !== undefined ? { reason: e.machine.reason } : {}),
      ready,
      draining: state === 'draining',
      live: e.engine !== undefined,
      slots_total: e.slotsTotal,
      slots_free: ready ? Math.max(0, e.slotsTotal - leases) : 0,
      active_leases: leases,
      // The bounds of contracts' PoolFactsSchema, which the status and the heartbeat share.
      models: e.models.slice(0, 64).map((m) => m.slice(0, 512)),
      ...aliasesOf(e),
      ...capabilitiesOf(e),
      ...(e.engine !== undefined
        ? { engine_version: e.engine.engine_version.slice(0, 128), engine_url: e.engine.url }
        : {}),
      ...(e.engine?.engine_fingerprint !== undefined ? { engine_fingerprint: e.engine.engine_fingerprint } : {}),
      ...(e.engine?.engine_patches !== undefined ? { engine_patches: [...e.engine.engine_patches] } : {}),
      restarts: e.restarts,
      breaker: e.breaker,
      ...(e.lastError !== undefined ? { last_error: e.lastError.slice(0, 4096) } : {}),
      ...(e.progress !== undefined && state === 'provisioning' ? { progress: { ...e.progress } } : {}),
      deterministic: e.deterministic,
      ctx: e.ctx,
      decode_tps: e.decodeTps,
      ...(e.origin === 'catalog' ? { origin: e.origin } : {}),
      ...(e.idleSince !== undefined ? { idle_since: e.idleSince.toISOString() } : {}),
      ...this.#memoryOf(e),
      updated_at: e.machine.updatedAt.toISOString(),
    };
  }

  /** `memory_bytes` (see {@link committedBytes}): the bound engine's RSS read now, and the projection. */
  #memoryOf(e: PoolEntry): { memory_bytes?: number } {
    const pid = e.engine?.pid;
    const bytes = committedBytes({
      measured: pid !== undefined ? this.#residentBytes(pid) : undefined,
      projected: e.projectedBytes,
      holdsNothing: e.engine === undefined && (e.machine.state === 'stopped' || e.machine.state === 'failed'),
    });
    return bytes !== undefined ? { memory_bytes: bytes } : {};
  }

  /** Every pool, sorted by id. */
  statuses(): PoolStatus[] {
    return this.ids().map((id) => this.status(id));
  }

  /**
   * Heartbeat view of every pool, sorted by id: only what is known, never a guess. `aliases` only
   * when the pool has some: orchestratord resolves a request's model name through them.
   */
  snapshots(): PoolSnapshot[] {
    return this.statuses().map((s) => ({
      pool_id: s.pool_id,
      state: s.state,
      ready: s.ready,
      draining: s.draining,
      slots_total: s.slots_total,
      slots_free: s.slots_free,
      models: s.models,
      // Configured aliases name whatever model the pool serves, across reloads.
      ...(s.aliases !== undefined ? { aliases: s.aliases } : {}),
      engine_version: s.engine_version ?? '',
      ctx: s.ctx,
      deterministic: s.deterministic,
      decode_tps: s.decode_tps,
      ...(s.last_error !== undefined ? { last_error: s.last_error } : {}),
      ...(s.progress !== undefined ? { progress: s.progress } : {}),
      ...(s.capabilities !== undefined ? { capabilities: s.capabilities } : {}),
      ...(s.origin !== undefined ? { origin: s.origin } : {}),
      ...(s.idle_since !== undefined ? { idle_since: s.idle_since } : {}),
      ...(s.memory_bytes !== undefined ? { memory_bytes: s.memory_bytes } : {}),
    }));
  }

  lastHeartbeat(poolId: string): Date | undefined {
    return this.#get(poolId).lastHeartbeat;
  }

  /** Called on every change (state, leases, engine, errors); `change` is set for state transitions. */
  onChange(listener: (poolId: string, change: PoolStateChange | undefined) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Called when a pool's first slot is leased after it was idle, and when its last lease ends (`idle_since` changes). */
  onIdleChange(listener: (poolId: string, idle: boolean) => void): () => void {
    this.#idleness.add(listener);
    return () => this.#idleness.delete(listener);
  }

  /** Called when a pool joins (register) or leaves (remove) the table. */
  onMembership(listener: (poolId: string, event: 'added' | 'removed') => void): () => void {
    this.#membership.add(listener);
    return () => this.#membership.delete(listener);
  }

  #emit(poolId: string, change: PoolStateChange | undefined): void {
    for (const l of this.#listeners) l(poolId, change);
  }

  #get(poolId: string): PoolEntry {
    const e = this.#pools.get(poolId);
    if (e === undefined) throw new PoolNotFoundError(poolId);
    return e;
  }
}

function aliasesOf(e: PoolEntry): { aliases?: string[] } {
  return e.aliases.length > 0 ? { aliases: [...e.aliases] } : {};
}

function capabilitiesOf(e: PoolEntry): { capabilities?: PoolCapability[] } {
  const c = e.engine?.capabilities ?? e.capabilities;
  return c !== undefined ? { capabilities: [...c] } : {};
}

function isReady(e: PoolEntry): boolean {
  return e.machine.state === 'ready' && e.engine !== undefined;
}
