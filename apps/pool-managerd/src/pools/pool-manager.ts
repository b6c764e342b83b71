import type { Logger } from 'pino';
import { closeAll } from '@llama-orch/daemon-support';
import type { DispatchRequest, PoolConfig, PoolLoadRequest, PoolStatus } from '@llama-orch/contracts';
import type { LlamaServerClient } from '@llama-orch/llamacpp-adapter';
import {
  ConflictError,
  EngineNotReachedError,
  PoolNotFoundError,
  PoolNotManagedError,
  PoolUnreadyError,
} from '../errors.js';
import { HandoffWatcher } from '../handoff/handoff-watcher.js';
import { drain } from '../operations/drain.js';
import { reload } from '../operations/reload.js';
import type { EngineClients } from '../replicas/engine-clients.js';
import { PoolManagerMetrics } from '../support/metrics.js';
import { sweepStalePidFiles } from '../support/pid-files.js';
import type { RuntimeDir } from '../support/runtime-dir.js';
import { EngineMetricsScraper } from './engine-metrics.js';
import { runAnswerDispatch, type AnswerSend } from './answer-dispatch.js';
import { runDispatch, type DispatchEmit, type DispatchOptions } from './dispatch.js';
import type { ExternalPool } from './external-pool.js';
import { HandoffRouter } from './handoff-router.js';
import { HeldDispatches } from './held-dispatches.js';
import { ManagedPool } from './managed-pool.js';
import { PoolLoads } from './pool-loads.js';
import { PoolMemory } from './pool-memory.js';
import { PoolTable, UNREADY_RETRY_MS } from './pool-table.js';
import type { OpenCompletionOptions, PoolManagerOptions } from './pool-manager-options.js';

export type { OpenCompletionOptions, PoolManagerOptions } from './pool-manager-options.js';

/** Time a pool's close may take beyond its engine's SIGTERM grace (SIGKILL, files), ms. */
const CLOSE_MARGIN_MS = 5000;

/**
 * Everything pool-managerd runs: one {@link ManagedPool} per configured pool and per load on
 * request ({@link PoolLoads}), the pools made of adopted external engines (routed by
 * {@link HandoffRouter}), the handoff watcher, the pool table, the pools' memory, engine HTTP
 * clients and metrics. `start()` sweeps orphans of an earlier run, then provisions all pools
 * concurrently.
 */
export class PoolManager {
  readonly nodeId: string;
  readonly pools: PoolTable;
  /** Each pool's projected memory, and the on-demand budget loads are admitted against. */
  readonly memory: PoolMemory;
  readonly metrics: PoolManagerMetrics;
  /** Reads the engines' `/metrics` into {@link metrics} (`llorch_engine_*`) once the daemon serves. */
  readonly engineMetrics: EngineMetricsScraper;
  /** Re-attachable dispatches (`reattach_ms`), shared by the API and h2c listeners. */
  readonly held: HeldDispatches;
  readonly #runtime: RuntimeDir;
  readonly #serving: Promise<void>;
  readonly #stopTimeoutMs: number;
  readonly #log: Logger;
  readonly #managed = new Map<string, ManagedPool>();
  readonly #external = new Map<string, ExternalPool>();
  readonly #clients = new Map<string, LlamaServerClient>();
  #engineClients: Promise<EngineClients> | undefined;
  #loadedClients: EngineClients | undefined;
  readonly #watcher: HandoffWatcher;
  readonly #loads: PoolLoads;
  readonly #handoffs: HandoffRouter;
  readonly #poolOptions: Omit<ConstructorParameters<typeof ManagedPool>[0], 'pool' | 'origin'>;
  #state: 'idle' | 'running' | 'closing' | 'closed' = 'idle';
  #closing: Promise<void> | undefined;

  constructor(options: PoolManagerOptions) {
    const {
      nodeId,
      runtime,
      logger,
      serving = Promise.resolve(),
      adoptTimeoutMs = 30_000,
      externalProbeMs,
      handoffStabilityMs,
    } = options;
    this.nodeId = nodeId;
    this.#runtime = runtime;
    this.#serving = serving;
    this.#stopTimeoutMs = options.supervision.stopTimeoutMs;
    this.#log = logger.child({ component: 'pool-manager' });
    this.pools = new PoolTable({
      ...(options.clock !== undefined ? { clock: options.clock } : {}),
      ...(options.residentBytes !== undefined ? { residentBytes: options.residentBytes } : {}),
    });
    this.memory = new PoolMemory({
      table: this.pools,
      budgetBytes: options.onDemand?.memory_budget_bytes,
      logger,
      engineEnv: options.engineEnv,
    });
    this.metrics = new PoolManagerMetrics(this.pools);
    this.held = new HeldDispatches(this.metrics);
    this.engineMetrics = new EngineMetricsScraper({
      table: this.pools,
      series: this.metrics.engines,
      clientFor: (url) => this.engineClient(url),
      intervalMs: options.engineMetricsIntervalMs ?? 5000,
      logger: this.#log.child({ component: 'engine-metrics' }),
    });
    this.#poolOptions = {
      table: this.pools,
      memory: this.memory,
      engines: options.engines,
      models: options.models,
      runtime,
      logger,
      metrics: this.metrics,
      engineEnv: options.engineEnv,
      wrapper: options.wrapper,
      clientFor: (url) => this.engineClient(url),
      supervision: options.supervision,
      engineLog: options.engineLog,
      externalProbeMs,
      adoptTimeoutMs,
      serving,
    };
    for (const pool of options.pools) this.#managed.set(pool.id, new ManagedPool({ ...this.#poolOptions, pool }));
    this.#loads = new PoolLoads({
      onDemand: options.onDemand,
      table: this.pools,
      memory: this.memory,
      metrics: this.metrics,
      logger,
      models: options.models,
      open: (pool) => this.#openLoad(pool),
      pool: (poolId) => this.#managed.get(poolId),
      forget: (poolId) => {
        this.#managed.delete(poolId);
        this.pools.remove(poolId);
        this.memory.forget(poolId);
      },
      closing: () => this.#state === 'closing' || this.#state === 'closed',
    });
    this.#handoffs = new HandoffRouter({
      enginesDir: runtime.engines,
      table: this.pools,
      metrics: this.metrics,
      log: this.#log,
      managed: this.#managed,
      external: this.#external,
      engineClient: (url) => this.engineClient(url),
      adoptTimeoutMs,
      externalProbeMs,
    });
    this.#watcher = new HandoffWatcher({
      dir: runtime.engines,
      logger: this.#log.child({ component: 'handoff-watcher' }),
      ...(handoffStabilityMs !== undefined ? { stabilityMs: handoffStabilityMs } : {}),
      onHandoff: (path, h, signal) => this.#handoffs.onHandoff(path, h, signal),
      onRemoved: (path) => this.#handoffs.onRemoved(path),
      onRejected: (_path, reason) => this.metrics.handoffsRejected.inc({ reason }),
      onAccepted: (_path, h) => this.metrics.handoffsProcessed.inc({ mode: h.provisioning_mode }),
    });
  }

  get state(): 'idle' | 'running' | 'closing' | 'closed' {
    return this.#state;
  }

  get watcher(): HandoffWatcher {
    return this.#watcher;
  }

  /**
   * The client of the engine at `url` (one per URL, each with its own connection pool). undici and
   * the client are loaded on the first call, which comes right after the first engine spawned:
   * their loading overlaps the engine's start instead of delaying the spawn.
   */
  async engineClient(url: string): Promise<LlamaServerClient> {
    this.#engineClients ??= import('../replicas/engine-clients.js').then((m) => {
      this.#loadedClients = m.createEngineClients();
      return this.#loadedClients;
    });
    await this.#engineClients;
    return this.clientFor(url);
  }

  /**
   * Synchronous {@link engineClient} for request handlers. Every bound engine was reached through
   * `engineClient` first, so this only throws ({@link EngineNotReachedError}, 503) for a URL no
   * engine of this daemon has.
   */
  clientFor(url: string): LlamaServerClient {
    let c = this.#clients.get(url);
    if (c === undefined) {
      const clients = this.#loadedClients;
      if (clients === undefined) throw new EngineNotReachedError(url);
      c = clients.create(url);
      this.#clients.set(url, c);
    }
    return c;
  }

  /** The settings of every managed pool: the YAML's, then the loads on request. */
  poolConfigs(): PoolConfig[] {
    return [...this.#managed.values()].map((p) => p.config);
  }

  /** Loads a catalog model as a new pool (`POST /v2/pools`; see {@link PoolLoads.load}). */
  load(request: PoolLoadRequest): Promise<PoolStatus> {
    return this.#loads.load(request);
  }

  /** Unloads a pool loaded on request (`DELETE /v2/pools/{id}`; see {@link PoolLoads.unload}). */
  unload(poolId: string, deadlineMs: number): PoolStatus {
    return this.#loads.unload(poolId, deadlineMs);
  }

  /** An admitted load: its pool joins the others and starts at once (the manager runs, or will). */
  #openLoad(pool: PoolConfig): ManagedPool {
    const managed = new ManagedPool({ ...this.#poolOptions, pool, origin: 'catalog' });
    this.#managed.set(pool.id, managed);
    if (this.#state === 'running') void managed.start();
    return managed;
  }

  /** Model ids served by running pools (never evicted from the model cache). */
  modelInUse(id: string): boolean {
    for (const p of this.#managed.values()) if (p.modelId === id) return true;
    return false;
  }

  /**
   * Opens a completion on pool `poolId`: takes a lease and returns the dispatch, which runs the
   * engine's events into the `emit` it is given (see {@link runDispatch}). Throws before any event — {@link PoolNotFoundError}, a
   * {@link PoolUnreadyError} or ReplicaExhaustedError — so the caller can still answer with a status.
   */
  openCompletion(
    poolId: string,
    request: DispatchRequest,
    options: OpenCompletionOptions,
  ): (emit: DispatchEmit) => Promise<void> {
    const dispatch = this.#leaseDispatch(poolId, request, options);
    return (emit) => runDispatch(dispatch, emit);
  }

  /**
   * {@link openCompletion} for a non-streamed dispatch (`stream: false`): the same lease and
   * refusals; the run hands its one `result` (or `error`) line to `send`.
   */
  openAnswer(
    poolId: string,
    request: DispatchRequest,
    options: OpenCompletionOptions,
  ): (send: AnswerSend) => Promise<void> {
    const dispatch = this.#leaseDispatch(poolId, request, options);
    return (send) => runAnswerDispatch(dispatch, send);
  }

  #leaseDispatch(
    poolId: string,
    request: DispatchRequest,
    { signal, log, trace }: OpenCompletionOptions,
  ): DispatchOptions {
    const lease = this.pools.lease(poolId);
    const engine = this.pools.engine(poolId);
    let client: LlamaServerClient | undefined;
    try {
      // Unbound between the lease check and here: the engine just exited.
      if (engine === undefined) throw new PoolUnreadyError(poolId, 'its engine just exited', UNREADY_RETRY_MS);
      client = this.clientFor(engine.url);
    } catch (err) {
      lease.release();
      throw err;
    }
    trace?.leased({
      model: this.pools.models(poolId)[0],
      replicaId: engine.replica_id,
      engineVersion: engine.engine_version,
    });
    return {
      poolId,
      nodeId: this.nodeId,
      request,
      lease,
      client,
      engineUrl: engine.url,
      engineVersion: engine.engine_version,
      pools: this.pools,
      metrics: this.metrics,
      logger: log,
      clientGone: signal,
      trace,
    };
  }

  /**
   * Kills orphans of an earlier run (stale PID files), removes its managed handoff files, provisions
   * every pool concurrently (not awaited: pools report progress) and starts the handoff watcher once
   * the daemon serves (see {@link PoolManagerOptions.serving}).
   */
  async start(): Promise<void> {
    if (this.#state !== 'idle') return;
    this.#state = 'running';
    const killed = sweepStalePidFiles(this.#runtime.pids, this.#log);
    if (killed.length > 0) this.#log.warn({ pids: killed }, 'orphan engines of a previous run killed');
    this.#handoffs.removeStaleManagedHandoffs();
    // Pools first: the engines' own start-up is the long pole, and our handoff files are
    // recognised (same pid) whenever the watcher's initial scan sees them.
    for (const p of this.#managed.values()) void p.start();
    await this.#serving;
    if (this.#state !== 'running') return;
    this.engineMetrics.start();
    await this.#watcher.start();
  }

  /**
   * Resolves once every configured pool has spawned its first engine (or failed to), or after
   * `maxMs`, whichever is first. main.ts loads the HTTP stack after it: with a warm cache the
   * engines spawn first and their start overlaps the rest of the daemon's start-up; a cold cache
   * (build, download) holds the API back by at most `maxMs`.
   */
  async enginesSpawned(maxMs: number): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      Promise.all([...this.#managed.values()].map((p) => p.firstSpawn)),
      new Promise<void>((resolve) => {
        timer = setTimeout(resolve, maxMs);
        timer.unref();
      }),
    ]);
    clearTimeout(timer);
  }

  /**
   * Drain (spec 50): no new leases, in-flight work until `deadlineMs`, then stop. Configured pools
   * stop their engine; an adopted external engine is released (not killed: it is not ours).
   * Throws synchronously for unknown or busy pools; the returned promise is the whole operation.
   */
  drain(poolId: string, deadlineMs: number): Promise<void> {
    const pool = this.#managed.get(poolId) ?? this.#external.get(poolId);
    if (pool === undefined) throw new PoolNotFoundError(poolId);
    return drain(pool, deadlineMs);
  }

  /**
   * Reload with rollback; only the YAML's pools can load another model (a pool loaded on request
   * serves its catalog model: orchestratord unloads it and loads another).
   */
  reload(poolId: string, ref: string, sha256: string | undefined, deadlineMs: number): Promise<void> {
    const pool = this.#managed.get(poolId);
    if (pool?.origin === 'catalog')
      throw new ConflictError(`pool '${poolId}' was loaded on request; unload it and load ${ref} instead`, { poolId });
    if (pool !== undefined) return reload(pool, { ref, sha256, deadlineMs });
    if (!this.pools.has(poolId)) throw new PoolNotFoundError(poolId);
    throw new PoolNotManagedError(poolId);
  }

  /**
   * Stops the watcher, every pool (engines SIGTERM → SIGKILL) and the HTTP clients: every step is
   * attempted even when one fails (each bounded). Idempotent; rejects with the failed steps' names
   * after all of them ran, so the daemon exits non-zero.
   */
  close(): Promise<void> {
    this.#closing ??= (async () => {
      this.#state = 'closing';
      const report = await closeAll(
        [
          { name: 'engine metrics', close: () => this.engineMetrics.close() },
          { name: 'handoff watcher', close: () => this.#watcher.close() },
          { name: 'adopted engines', close: () => [...this.#external.values()].forEach((p) => p.close()) },
          // Concurrently: each pool's engine gets its SIGTERM grace at the same time.
          { name: 'pools', close: () => this.#closePools(), timeoutMs: this.#stopTimeoutMs + CLOSE_MARGIN_MS },
          { name: 'held dispatches', close: () => this.held.close() },
          { name: 'engine clients', close: () => this.#closeClients() },
        ],
        { log: this.#log },
      );
      this.#state = 'closed';
      if (report.failed.length > 0)
        throw new Error(`pool manager: ${report.failed.map((f) => f.name).join(', ')} failed to close`);
    })();
    return this.#closing;
  }

  async #closePools(): Promise<void> {
    const pools = [...this.#managed.values()];
    const results = await Promise.allSettled(pools.map((p) => p.close()));
    const failed = results.flatMap((r, i) =>
      r.status === 'rejected' ? [{ pool: pools[i]?.poolId, err: r.reason as unknown }] : [],
    );
    if (failed.length > 0)
      throw new AggregateError(
        failed.map((f) => f.err),
        `pools ${failed.map((f) => f.pool).join(', ')} failed to close`,
      );
  }

  async #closeClients(): Promise<void> {
    await Promise.all([...this.#clients.values()].map((c) => c.close()));
    const clients = await this.#engineClients?.catch(() => undefined);
    await clients?.close();
  }
}
