import type { Logger } from 'pino';
import type { HandoffFile, PoolConfig, PoolOrigin, ResolvedModel } from '@llama-orch/contracts';
import type { EngineBinary, EngineProvisioner } from '@llama-orch/engine-provisioner';
import type { ModelProvisioner } from '@llama-orch/model-provisioner';
import type { LlamaServerClient } from '@llama-orch/llamacpp-adapter';
import { HandoffError } from '../errors.js';
import { probeExternalEngine } from '../handoff/adoption.js';
import type { PoolLeases, PoolLifecycle, ReloadablePool, ServedModel } from '../operations/operable-pool.js';
import { provision } from '../provisioning/provision.js';
import { Replica } from '../replicas/replica.js';
import type { SupervisionSettings } from '../supervision/settings.js';
import type { PoolManagerMetrics } from '../support/metrics.js';
import type { RotatingLogOptions } from '../support/rotating-log.js';
import type { RuntimeDir } from '../support/runtime-dir.js';
import { AdoptedEngine } from './adopted-engine.js';
import type { PoolMemory } from './pool-memory.js';
import { replicaEvents } from './replica-events.js';
import type { PoolStateMachine } from './pool-state.js';
import type { PoolTable } from './pool-table.js';

export interface ManagedPoolOptions {
  pool: PoolConfig;
  /** `catalog`: loaded on orchestratord's request (POST /v2/pools); it starts only if it fits. @default config */
  origin?: PoolOrigin;
  /** Projects the engine's memory once the model is here; admits a load on request before its engine starts. */
  memory: PoolMemory;
  table: PoolTable;
  engines: Pick<EngineProvisioner, 'ensureBinary' | 'prepare'>;
  models: Pick<ModelProvisioner, 'ensure'>;
  runtime: RuntimeDir;
  logger: Logger;
  metrics: PoolManagerMetrics;
  /** Complete, scrubbed environment of engine processes. */
  engineEnv: Readonly<Record<string, string>>;
  /** Exec-in-place prefix (setpriv --pdeathsig); empty when unavailable. A promise is awaited before each spawn. */
  wrapper: readonly string[] | Promise<readonly string[]>;
  /** Client of the engine at `url`; may load the HTTP client stack, so it is first asked for after the spawn. */
  clientFor: (url: string) => Promise<LlamaServerClient>;
  supervision: SupervisionSettings;
  engineLog?: RotatingLogOptions | undefined;
  /** Probe interval of an adopted external engine, ms. @default 2000 */
  externalProbeMs?: number | undefined;
  /** How long an adopted engine may take to answer /health 200, ms. @default 30000 */
  adoptTimeoutMs?: number | undefined;
  /** Readiness is published only after this settles (the daemon's HTTP API listens). @default settled */
  serving?: Promise<void> | undefined;
}

/** Replica id of a pool's (single) engine run. */
const REPLICA_ID = 'r0';

function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/**
 * One configured pool: its provisioning step, then one {@link Replica} (supervised engine run) at a
 * time, whose events it turns into pool facts and state transitions; an external engine adopted
 * when it has none. Drain and reload (`operations/`) act on it through {@link ReloadablePool}.
 * Its state lives in the pool table's state machine, the one authority: no transition is skipped.
 */
export class ManagedPool implements ReloadablePool {
  readonly poolId: string;
  readonly replicaId = REPLICA_ID;
  readonly log: Logger;
  readonly leases: PoolLeases;
  readonly drainedReason = 'drained';
  readonly origin: PoolOrigin;
  readonly #pool: PoolConfig;
  readonly #table: PoolTable;
  /** Kept apart from the table: an unloaded pool leaves the table while its close may still run. */
  readonly #lifecycle: PoolStateMachine;
  readonly #memory: PoolMemory;
  readonly #engines: Pick<EngineProvisioner, 'ensureBinary' | 'prepare'>;
  readonly #models: Pick<ModelProvisioner, 'ensure'>;
  readonly #runtime: RuntimeDir;
  readonly #metrics: PoolManagerMetrics;
  readonly #engineEnv: Readonly<Record<string, string>>;
  readonly #wrapper: readonly string[] | Promise<readonly string[]>;
  readonly #clientFor: (url: string) => Promise<LlamaServerClient>;
  readonly #supervision: SupervisionSettings;
  readonly #engineLog: RotatingLogOptions | undefined;
  readonly #externalProbeMs: number | undefined;
  readonly #adoptTimeoutMs: number;
  readonly #serving: Promise<void>;
  #model: ServedModel;
  /** Binary from provisioning, reused by every start attempt (no repeated source/toolchain probes). */
  #binary: EngineBinary | undefined;
  #replica: Replica | undefined;
  /** The stop of the last engine run stopped: a second stopEngine (unload, then shutdown) waits for it. */
  #engineStopped: Promise<void> = Promise.resolve();
  #external: AdoptedEngine | undefined;
  #provisioning: AbortController | undefined;
  #retryTimer: NodeJS.Timeout | undefined;
  /** Shown as last_error even after the next ready (a reload rollback must stay visible). */
  #stickyError: string | undefined;
  #run: Promise<void> | undefined;
  #closing: Promise<void> | undefined;
  readonly #firstSpawn: Promise<void>;
  #markFirstSpawn!: () => void;

  constructor({
    pool,
    origin = 'config',
    memory,
    table,
    engines,
    models,
    runtime,
    logger,
    metrics,
    engineEnv,
    wrapper,
    clientFor,
    supervision,
    engineLog,
    externalProbeMs,
    adoptTimeoutMs = 30_000,
    serving = Promise.resolve(),
  }: ManagedPoolOptions) {
    this.poolId = pool.id;
    this.log = logger.child({ pool_id: pool.id });
    this.origin = origin;
    this.#memory = memory;
    this.#pool = pool;
    this.#table = table;
    this.#engines = engines;
    this.#models = models;
    this.#runtime = runtime;
    this.#metrics = metrics;
    this.#engineEnv = engineEnv;
    this.#wrapper = wrapper;
    this.#clientFor = clientFor;
    this.#supervision = supervision;
    this.#engineLog = engineLog;
    this.#externalProbeMs = externalProbeMs;
    this.#adoptTimeoutMs = adoptTimeoutMs;
    this.#serving = serving;
    this.#model = { ref: pool.model, sha256: pool.sha256, resolved: undefined };
    this.leases = { active: () => table.activeLeases(pool.id), abort: (reason) => table.abortLeases(pool.id, reason) };
    this.#firstSpawn = new Promise((resolve) => {
      this.#markFirstSpawn = resolve;
    });
    table.register(pool.id, {
      managed: true,
      ...(origin === 'catalog' ? { origin } : {}),
      models: [pool.model],
      aliases: pool.aliases,
      capabilities: pool.reranking ? ['rerank'] : pool.embeddings ? ['embeddings'] : undefined,
      deterministic: pool.determinism,
      ctx: pool.ctx,
      slotsTotal: pool.determinism ? 1 : pool.slots,
      state: 'provisioning',
      reason: 'waiting to provision',
    });
    this.#lifecycle = table.lifecycle(pool.id);
  }

  get lifecycle(): PoolLifecycle {
    return this.#lifecycle;
  }

  /** The pool's settings (its YAML entry, or what a load request made of the on-demand settings). */
  get config(): PoolConfig {
    return this.#pool;
  }

  get model(): ServedModel {
    return { ...this.#model };
  }

  /** Model file in use (pinned against cache eviction). */
  get modelId(): string | undefined {
    return this.#model.resolved?.id;
  }

  /** pid of the engine this pool runs or adopted, if any. */
  get enginePid(): number | undefined {
    return this.#replica?.pid ?? this.#external?.handoff.pid;
  }

  /**
   * Settles once this pool's first engine process exists, or once provisioning or the first start
   * failed, or on close: the point after which the daemon's own start-up no longer delays the engine.
   */
  get firstSpawn(): Promise<void> {
    return this.#firstSpawn;
  }

  /** Starts provisioning and supervision in the background; the promise settles when the first attempt did. */
  start(): Promise<void> {
    this.#run ??= this.#provisionAndRun();
    return this.#run;
  }

  async #provisionAndRun(): Promise<void> {
    const { ac, done } = this.#startProvisioning(this.#model.ref, this.#model.sha256, true);
    let model: ResolvedModel;
    try {
      model = await done;
    } catch (err) {
      this.#markFirstSpawn();
      if (ac.signal.aborted) return;
      this.log.error({ err }, 'pool provisioning failed');
      this.#failBringUp(`provisioning failed: ${errorMessage(err)}`);
      return;
    }
    // Drained, adopted over or shut down meanwhile: whoever aborted owns the pool now.
    if (ac.signal.aborted) return;
    this.#model = { ...this.#model, resolved: model };
    this.#table.setModels(this.poolId, [this.#model.ref, model.id]);
    // By the engine's llama-fit-params when it has one (~40 ms), beside the engine's start.
    const projected = this.#memory.project(this.#pool, model, this.#binary);
    if (this.origin === 'catalog') {
      // A load on request starts only if it fits next to the node's other pools.
      const projection = await projected;
      if (ac.signal.aborted) return;
      try {
        if (projection !== undefined) this.#memory.admit(this.poolId, projection);
      } catch (err) {
        this.#markFirstSpawn();
        this.log.error({ err }, 'pool load refused: not enough memory');
        this.#failBringUp(errorMessage(err));
        return;
      }
    }
    this.startReplica(model, false).catch(() => undefined);
  }

  /**
   * The bring-up failed before any engine ran: `failed` with `last_error`. A configured pool tries
   * again after the breaker cool-down; a pool loaded on request does not (orchestratord sees why in
   * the heartbeat and decides: unload it, load it elsewhere).
   */
  #failBringUp(message: string): void {
    this.#table.setLastError(this.poolId, message);
    if (this.origin === 'catalog') {
      this.lifecycle.transition('failed', message);
      return;
    }
    const cooldownMs = this.#supervision.breakerCooldownMs;
    this.lifecycle.transition('failed', `${message}; retry in ${Math.round(cooldownMs / 1000)} s`);
    this.#retryTimer = setTimeout(() => {
      this.#retryTimer = undefined;
      const { state, operation } = this.lifecycle;
      // Only a pool that still has nothing to run (no reload or adoption replaced it meanwhile).
      if (state === 'failed' && operation === undefined && this.#external === undefined && this.#replica === undefined)
        this.#run = this.#provisionAndRun();
    }, cooldownMs);
    this.#retryTimer.unref();
  }

  provision(ref: string, sha256: string | undefined, withEngine: boolean): Promise<ResolvedModel> {
    return this.#startProvisioning(ref, sha256, withEngine).done;
  }

  #startProvisioning(
    ref: string,
    sha256: string | undefined,
    withEngine: boolean,
  ): { ac: AbortController; done: Promise<ResolvedModel> } {
    const ac = new AbortController();
    this.#provisioning = ac;
    if (withEngine) this.lifecycle.transition('provisioning', `provisioning engine and model ${ref}`);
    const done = provision({
      pool: this.#pool,
      ref,
      sha256,
      withEngine,
      signal: ac.signal,
      engines: this.#engines,
      models: this.#models,
      metrics: this.#metrics,
      logger: this.log,
      onProgress: (p) => this.#table.setProgress(this.poolId, p),
    })
      .then(({ model, binary }) => {
        if (binary !== undefined) this.#binary = binary;
        return model;
      })
      .finally(() => {
        if (this.#provisioning === ac) this.#provisioning = undefined;
      });
    return { ac, done };
  }

  startReplica(model: ResolvedModel, trial: boolean): Promise<void> {
    const replica = new Replica({
      pool: this.#pool,
      replicaId: REPLICA_ID,
      model,
      binary: this.#binary,
      engines: this.#engines,
      engineEnv: this.#engineEnv,
      wrapper: this.#wrapper,
      clientFor: this.#clientFor,
      runtime: this.#runtime,
      supervision: this.#supervision,
      engineLog: this.#engineLog,
      metrics: this.#metrics,
      serving: this.#serving,
      trial,
      logger: this.log,
      events: replicaEvents({
        poolId: this.poolId,
        replicaId: REPLICA_ID,
        log: this.log,
        lifecycle: this.#lifecycle,
        table: this.#table,
        metrics: this.#metrics,
        breakerThreshold: this.#supervision.breakerThreshold,
        stickyError: () => this.#stickyError,
        spawned: () => this.#markFirstSpawn(),
      }),
    });
    this.#replica = replica;
    return replica.start();
  }

  hasEngine(): boolean {
    return this.#table.engine(this.poolId) !== undefined;
  }

  /** Unbinds and stops the current engine run (or releases an adopted engine). Idempotent. */
  async stopEngine(reason: string): Promise<void> {
    const replica = this.#replica;
    this.#replica = undefined;
    if (this.#table.has(this.poolId)) this.#table.unbindEngine(this.poolId);
    if (this.#external !== undefined) {
      this.#external.release();
      this.#external = undefined;
    }
    if (replica !== undefined) {
      this.log.debug({ reason }, 'stopping the engine run');
      this.#engineStopped = replica.stop();
    }
    await this.#engineStopped;
  }

  cancelBackground(reason: string): void {
    this.#provisioning?.abort(new Error(reason));
    if (this.#retryTimer !== undefined) clearTimeout(this.#retryTimer);
    this.#retryTimer = undefined;
  }

  commitModel(model: ServedModel & { resolved: ResolvedModel }): void {
    this.#model = { ref: model.ref, sha256: model.sha256, resolved: model.resolved };
    this.#stickyError = undefined;
    this.#table.setLastError(this.poolId, undefined);
    this.#table.setModels(this.poolId, [model.ref, model.resolved.id]);
    void this.#memory.project(this.#pool, model.resolved);
  }

  recordError(message: string): void {
    this.#stickyError = message;
    this.#table.setLastError(this.poolId, message);
  }

  /** Whether an external engine may be adopted into this pool (it has no engine of its own). */
  canAdopt(): boolean {
    const { state, operation } = this.lifecycle;
    return (
      operation === undefined &&
      this.#replica?.bound !== true &&
      (state === 'stopped' || state === 'failed' || this.#external !== undefined)
    );
  }

  /**
   * Adopts an external engine (see {@link canAdopt}): it is probed first, then the pool's own
   * (failing) run stops and the operator's engine takes its place. Throws {@link HandoffError}.
   */
  async adopt(path: string, handoff: HandoffFile, signal?: AbortSignal): Promise<void> {
    if (!this.canAdopt()) {
      throw new HandoffError(
        `pool ${this.poolId} is managed here and has its own engine (state ${this.lifecycle.state})`,
        { poolId: this.poolId },
      );
    }
    const client = await this.#clientFor(handoff.url);
    const props = await probeExternalEngine(client, handoff, {
      timeoutMs: this.#adoptTimeoutMs,
      ...(signal !== undefined ? { signal } : {}),
      onHealth: (h) => this.#metrics.healthChecks.inc({ pool_id: this.poolId, result: h }),
    });
    const busy = this.lifecycle.operation;
    if (busy !== undefined) throw new HandoffError(`pool ${this.poolId} is busy with ${busy}`, { poolId: this.poolId });
    this.cancelBackground('external engine adopted');
    await this.stopEngine('adopting an external engine');
    this.#external = new AdoptedEngine({
      table: this.#table,
      poolId: this.poolId,
      path,
      handoff,
      props,
      client,
      probeMs: this.#externalProbeMs,
      metrics: this.#metrics,
      logger: this.log,
    });
  }

  /** Handoff file removed: an adopted engine is released; our own file is written again. */
  async handoffRemoved(path: string): Promise<void> {
    if (this.#external !== undefined && this.#external.path === path) {
      this.#external.release();
      this.#external = undefined;
      this.lifecycle.transition('stopped', 'external handoff file removed');
      return;
    }
    await this.#replica?.restoreHandoff(path);
  }

  /** Whether `handoff` describes the engine this pool runs (its own file, seen by the watcher). */
  ownsHandoff(handoff: HandoffFile): boolean {
    return this.#replica?.ownsHandoff(handoff) === true;
  }

  /**
   * Shutdown: the pool is held by `shutdown` from here on; provisioning stops, in-flight work is
   * aborted, the engine stops (SIGTERM, SIGKILL after the stop timeout) and its handoff file goes;
   * the pool ends `stopped`. Idempotent; bounded by the supervision stop timeout.
   */
  close(): Promise<void> {
    this.#closing ??= (async () => {
      this.lifecycle.begin('shutdown');
      this.#markFirstSpawn();
      this.cancelBackground('pool-managerd shutting down');
      if (this.#table.has(this.poolId)) this.#table.abortLeases(this.poolId, 'pool-managerd shutting down');
      await this.stopEngine('shutdown');
      this.lifecycle.transition('stopped', 'pool-managerd shut down');
    })();
    return this.#closing;
  }
}
