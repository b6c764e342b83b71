import type { Logger } from 'pino';
import type { HandoffFile, PoolConfig, ResolvedModel } from '@llama-orch/contracts';
import type { EngineBinary, EngineProvisioner } from '@llama-orch/engine-provisioner';
import type { ModelProvisioner } from '@llama-orch/model-provisioner';
import type { LlamaServerClient } from '@llama-orch/llamacpp-adapter';
import { HandoffError } from '../errors.js';
import { probeExternalEngine } from '../handoff/adoption.js';
import type { PoolLeases, PoolLifecycle, ReloadablePool, ServedModel } from '../operations/operable-pool.js';
import { provision } from '../provisioning/provision.js';
import { Replica, type ReplicaEvents } from '../replicas/replica.js';
import type { SupervisionSettings } from '../supervision/settings.js';
import type { PoolManagerMetrics } from '../support/metrics.js';
import type { RotatingLogOptions } from '../support/rotating-log.js';
import type { RuntimeDir } from '../support/runtime-dir.js';
import { AdoptedEngine } from './adopted-engine.js';
import type { PoolTable } from './pool-table.js';

export interface ManagedPoolOptions {
  pool: PoolConfig;
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
  readonly #pool: PoolConfig;
  readonly #table: PoolTable;
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
      models: [pool.model],
      aliases: pool.aliases,
      capabilities: pool.reranking ? ['rerank'] : pool.embeddings ? ['embeddings'] : undefined,
      deterministic: pool.determinism,
      ctx: pool.ctx,
      slotsTotal: pool.determinism ? 1 : pool.slots,
      state: 'provisioning',
      reason: 'waiting to provision',
    });
  }

  get lifecycle(): PoolLifecycle {
    return this.#table.lifecycle(this.poolId);
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
      const message = `provisioning failed: ${errorMessage(err)}`;
      this.log.error({ err }, 'pool provisioning failed');
      this.#table.setLastError(this.poolId, message);
      const cooldownMs = this.#supervision.breakerCooldownMs;
      this.lifecycle.transition('failed', `${message}; retry in ${Math.round(cooldownMs / 1000)} s`);
      this.#retryTimer = setTimeout(() => {
        this.#retryTimer = undefined;
        const { state, operation } = this.lifecycle;
        // Only a pool that still has nothing to run (no reload or adoption replaced it meanwhile).
        if (
          state === 'failed' &&
          operation === undefined &&
          this.#external === undefined &&
          this.#replica === undefined
        )
          this.#run = this.#provisionAndRun();
      }, cooldownMs);
      this.#retryTimer.unref();
      return;
    }
    // Drained, adopted over or shut down meanwhile: whoever aborted owns the pool now.
    if (ac.signal.aborted) return;
    this.#model = { ...this.#model, resolved: model };
    this.#table.setModels(this.poolId, [this.#model.ref, model.id]);
    this.startReplica(model, false).catch(() => undefined);
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
      events: this.#replicaEvents(),
    });
    this.#replica = replica;
    return replica.start();
  }

  /** Replica events → pool facts and transitions (only the current run reports: see {@link Replica.stop}). */
  #replicaEvents(): ReplicaEvents {
    const table = this.#table;
    const poolId = this.poolId;
    return {
      starting: ({ attempt, restart }) => {
        if (restart) {
          table.countRestart(poolId);
          this.#metrics.restarts.inc({ pool_id: poolId });
        }
        this.lifecycle.transition('starting', restart ? `restarting engine (attempt ${attempt})` : 'starting engine');
      },
      spawned: () => this.#markFirstSpawn(),
      bound: (engine) => table.bindEngine(poolId, { ...engine, replica_id: REPLICA_ID, mode: 'managed' }),
      ready: (engine) => {
        table.setLastError(poolId, this.#stickyError);
        // An operation holding the pool (a reload's trial) announces readiness itself when it is done.
        if (this.lifecycle.operation === undefined) this.lifecycle.transition('ready', 'engine healthy');
        const { pid, url, engine_version, slots_total: slots } = engine;
        this.log.info(
          {
            pid,
            url,
            engine_version,
            engine_patches: engine.engine_patches ?? [],
            slots,
            human: `pool ${poolId} ready on ${url}`,
          },
          'pool ready',
        );
      },
      exited: (what) => {
        table.unbindEngine(poolId);
        this.lifecycle.transition('starting', `engine exited (${what}); restart pending`);
      },
      failure: (error, delayMs) => {
        this.#markFirstSpawn();
        table.setLastError(poolId, error);
        if (delayMs !== undefined)
          this.lifecycle.transition('starting', `engine failed; restart in ${delayMs} ms: ${error}`);
      },
      open: (error, retryAt) => {
        table.setLastError(
          poolId,
          `circuit open after ${this.#supervision.breakerThreshold} consecutive failures: ${error}`,
        );
        this.lifecycle.transition('failed', `circuit open; next trial at ${new Date(retryAt).toISOString()}`);
      },
      breaker: (state) => table.setBreaker(poolId, state),
    };
  }

  hasEngine(): boolean {
    return this.#table.engine(this.poolId) !== undefined;
  }

  /** Unbinds and stops the current engine run (or releases an adopted engine). Idempotent. */
  async stopEngine(reason: string): Promise<void> {
    const replica = this.#replica;
    this.#replica = undefined;
    this.#table.unbindEngine(this.poolId);
    if (this.#external !== undefined) {
      this.#external.release();
      this.#external = undefined;
    }
    if (replica !== undefined) {
      this.log.debug({ reason }, 'stopping the engine run');
      await replica.stop();
    }
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
      this.#table.abortLeases(this.poolId, 'pool-managerd shutting down');
      await this.stopEngine('shutdown');
      this.lifecycle.transition('stopped', 'pool-managerd shut down');
    })();
    return this.#closing;
  }
}
