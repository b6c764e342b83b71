import type { Logger } from 'pino';
import type { HandoffFile, PoolCapability, PoolConfig, PreparedEngine, ResolvedModel } from '@llama-orch/contracts';
import type { EngineBinary, EngineProvisioner } from '@llama-orch/engine-provisioner';
import type { LlamaServerClient } from '@llama-orch/llamacpp-adapter';
import { managedHandoff, removeHandoffFile, writeHandoffFile } from '../handoff/handoff-file.js';
import { BackoffPolicy } from '../supervision/backoff.js';
import { engineCapabilities } from '../supervision/engine-capabilities.js';
import { CircuitBreaker, type BreakerState } from '../supervision/circuit-breaker.js';
import { EngineProcess } from '../supervision/engine-process.js';
import { RestartLimiter } from '../supervision/restart-limiter.js';
import type { SupervisionSettings } from '../supervision/settings.js';
import { Supervisor, type SupervisorEvents } from '../supervision/supervisor.js';
import { systemClock } from '@llama-orch/daemon-support';
import type { PoolManagerMetrics } from '../support/metrics.js';
import type { RotatingLogOptions } from '../support/rotating-log.js';
import type { RuntimeDir } from '../support/runtime-dir.js';

/** What a healthy engine says about itself (`/props`), plus where and who it is. */
export interface ReadyEngine {
  url: string;
  engine_version: string;
  engine_fingerprint: string;
  /** llama-orch's llama.cpp patches the binary was built with, in order (absent: none). */
  engine_patches?: string[];
  slots_total: number;
  ctx: number;
  pid: number;
  /** What the engine serves (its flags, and `/infill` for the model's FIM tokens). */
  capabilities: PoolCapability[];
}

/**
 * What one replica run reports to its pool. Nothing is reported once the replica is stopped: a
 * retired run can never move its pool.
 */
export interface ReplicaEvents {
  /** A process is about to start (attempt 1 = the run's first start). */
  starting(info: { attempt: number; restart: boolean }): void;
  /** The run's first process exists (spawned; the daemon's own start no longer delays it). */
  spawned(): void;
  /** The engine answered `/health` 200 and `/props`: bind it. Its handoff file is written next. */
  bound(engine: ReadyEngine): void;
  /** The bound engine may be announced: the daemon serves, the engine still runs, its handoff file is written. */
  ready(engine: ReadyEngine): void;
  /** The ready engine exited unasked (`what`: code or signal): unbind it; a restart follows. */
  exited(what: string): void;
  /** A start failed or the engine crashed; next try in `delayMs` (undefined: the circuit opened). */
  failure(error: string, delayMs: number | undefined): void;
  /** Circuit open after consecutive failures: no start before `retryAt` (epoch ms). */
  open(error: string, retryAt: number): void;
  breaker(state: BreakerState): void;
}

export interface ReplicaOptions {
  pool: PoolConfig;
  replicaId: string;
  model: ResolvedModel;
  /** Binary from provisioning, reused by every start attempt (no repeated source/toolchain probes). */
  binary: EngineBinary | undefined;
  engines: Pick<EngineProvisioner, 'prepare'>;
  /** Complete, scrubbed environment of engine processes. */
  engineEnv: Readonly<Record<string, string>>;
  /** Exec-in-place prefix (setpriv --pdeathsig); empty when unavailable. A promise is awaited before each spawn. */
  wrapper: readonly string[] | Promise<readonly string[]>;
  /** Client of the engine at `url`; may load the HTTP client stack, so it is first asked for after the spawn. */
  clientFor: (url: string) => Promise<LlamaServerClient>;
  runtime: RuntimeDir;
  supervision: SupervisionSettings;
  engineLog?: RotatingLogOptions | undefined;
  metrics: PoolManagerMetrics;
  /** `ready` is reported only after this settles (the daemon's HTTP API listens). */
  serving: Promise<void>;
  /** Trial run (reload): the first failed start ends the run and rejects {@link Replica.start}. */
  trial: boolean;
  /** The pool's logger. */
  logger: Logger;
  events: ReplicaEvents;
}

interface AttemptMeta {
  prepared: PreparedEngine;
  client: () => Promise<LlamaServerClient>;
}

interface BoundEngine {
  proc: EngineProcess;
  record: HandoffFile;
  /** Set once the handoff file is written. */
  path: string | undefined;
}

/**
 * One supervised engine run of a pool: a {@link Supervisor} that starts a fresh
 * {@link EngineProcess} per attempt (prepared again, so a taken port is replaced), binds each
 * engine that turns healthy, writes its handoff file and removes it when the engine goes. A model
 * change or an adoption ends the run ({@link stop}) and, for a model change, starts another.
 */
export class Replica {
  readonly poolId: string;
  readonly replicaId: string;
  #state: 'idle' | 'running' | 'stopped' = 'idle';
  readonly #pool: PoolConfig;
  readonly #model: ResolvedModel;
  readonly #binary: EngineBinary | undefined;
  readonly #engines: Pick<EngineProvisioner, 'prepare'>;
  readonly #engineEnv: Readonly<Record<string, string>>;
  readonly #wrapper: readonly string[] | Promise<readonly string[]>;
  readonly #clientFor: (url: string) => Promise<LlamaServerClient>;
  readonly #runtime: RuntimeDir;
  readonly #supervision: SupervisionSettings;
  readonly #engineLog: RotatingLogOptions | undefined;
  readonly #metrics: PoolManagerMetrics;
  readonly #serving: Promise<void>;
  readonly #log: Logger;
  readonly #events: ReplicaEvents;
  readonly #supervisor: Supervisor<AttemptMeta>;
  #attempts = 0;
  #bound: BoundEngine | undefined;
  /** The bind of the latest ready engine (props, handoff file, announcement). Never rejects. */
  #binding: Promise<void> = Promise.resolve();
  #started: Promise<void> | undefined;
  #stopping: Promise<void> | undefined;

  constructor({
    pool,
    replicaId,
    model,
    binary,
    engines,
    engineEnv,
    wrapper,
    clientFor,
    runtime,
    supervision,
    engineLog,
    metrics,
    serving,
    trial,
    logger,
    events,
  }: ReplicaOptions) {
    this.poolId = pool.id;
    this.replicaId = replicaId;
    this.#pool = pool;
    this.#model = model;
    this.#binary = binary;
    this.#engines = engines;
    this.#engineEnv = engineEnv;
    this.#wrapper = wrapper;
    this.#clientFor = clientFor;
    this.#runtime = runtime;
    this.#supervision = supervision;
    this.#engineLog = engineLog;
    this.#metrics = metrics;
    this.#serving = serving;
    this.#log = logger.child({ replica_id: replicaId });
    this.#events = events;
    this.#supervisor = this.#createSupervisor(trial);
  }

  /** pid of the engine this run has bound, or of the process it is starting. */
  get pid(): number | undefined {
    return this.#bound?.proc.pid ?? this.#supervisor.current?.pid;
  }

  /** Whether an engine of this run is bound (healthy, `/props` read). */
  get bound(): boolean {
    return this.#bound !== undefined;
  }

  /**
   * Starts supervising. Settles once the first engine was ready and its bind finished (the pool may
   * still have no engine when `/props` failed: a restart follows); rejects when stopped first or, in
   * a trial run, when the first start failed.
   */
  start(): Promise<void> {
    if (this.#started !== undefined) return this.#started;
    this.#state = 'running';
    // The supervisor emits `ready` synchronously after settling its first outcome, so #binding is
    // the first engine's bind by the time this continuation runs.
    this.#started = this.#supervisor.start().then(() => this.#binding);
    return this.#started;
  }

  /** Whether `handoff` is the file this run wrote for its running engine (the watcher sees our own files). */
  ownsHandoff(handoff: HandoffFile): boolean {
    return handoff.provisioning_mode === 'managed' && this.#bound !== undefined && this.#bound.proc.pid === handoff.pid;
  }

  /** The handoff file at `path` was removed: if it is ours and our engine runs, it is written again. */
  async restoreHandoff(path: string): Promise<void> {
    const bound = this.#bound;
    if (bound === undefined || bound.path !== path || bound.proc.state !== 'ready') return;
    this.#log.warn({ path }, 'handoff file of a running managed engine was removed; writing it again');
    bound.path = await writeHandoffFile(this.#runtime.engines, {
      ...bound.record,
      written_at: new Date().toISOString(),
    });
  }

  /**
   * Ends the run: no event is reported from here on, the handoff file is removed and the engine
   * stopped (SIGTERM, SIGKILL after the supervision stop timeout). Idempotent.
   */
  stop(): Promise<void> {
    this.#stopping ??= (async () => {
      this.#state = 'stopped';
      const path = this.#bound?.path;
      this.#bound = undefined;
      if (path !== undefined) await this.#removeHandoff(path, 'stopped');
      await this.#supervisor.stop(this.#supervision.stopTimeoutMs);
    })();
    return this.#stopping;
  }

  #createSupervisor(trial: boolean): Supervisor<AttemptMeta> {
    const s = this.#supervision;
    const clock = s.clock ?? systemClock;
    const sup = new Supervisor<AttemptMeta>({
      name: `${this.poolId}-${this.replicaId}`,
      logger: this.#log.child({ component: 'supervisor' }),
      clock,
      failFast: trial,
      stableAfterMs: s.stableAfterMs,
      stopTimeoutMs: s.stopTimeoutMs,
      backoff: new BackoffPolicy({
        baseMs: s.backoffBaseMs,
        maxMs: s.backoffMaxMs,
        jitter: s.jitter,
        ...(s.random ? { random: s.random } : {}),
      }),
      breaker: new CircuitBreaker({ threshold: s.breakerThreshold, cooldownMs: s.breakerCooldownMs, clock }),
      limiter: new RestartLimiter({ max: s.restartMax, windowMs: s.restartWindowMs, clock }),
      createProcess: () => this.#createProcess(),
    });
    // The one guard of the run: a stopped replica reports nothing.
    const on = <K extends keyof SupervisorEvents<AttemptMeta>>(
      event: K,
      listener: SupervisorEvents<AttemptMeta>[K],
    ): void => {
      sup.on(event, ((...args: Parameters<SupervisorEvents<AttemptMeta>[K]>) => {
        if (this.#state === 'running') (listener as (...a: typeof args) => void)(...args);
      }) as SupervisorEvents<AttemptMeta>[K]);
    };
    on('starting', (info) => this.#events.starting(info));
    on('ready', (proc, meta) => {
      this.#binding = this.#bind(proc, meta).catch((err: unknown) =>
        this.#log.error({ err }, 'binding the ready engine failed'),
      );
    });
    on('exited', ({ exit, proc }) => {
      const what = exit.signal !== null ? `signal ${exit.signal}` : `code ${exit.code}`;
      this.#log.warn({ pid: proc.pid, code: exit.code, signal: exit.signal }, 'engine exited unexpectedly');
      const path = this.#bound?.path;
      this.#bound = undefined;
      if (path !== undefined) void this.#removeHandoff(path, `engine exited (${what})`);
      this.#events.exited(what);
    });
    on('failure', ({ error, delayMs }) => this.#events.failure(error, delayMs));
    on('open', ({ error, retryAt }) => this.#events.open(error, retryAt));
    on('breaker', (state) => this.#events.breaker(state));
    return sup;
  }

  async #createProcess(): Promise<{ proc: EngineProcess; meta: AttemptMeta }> {
    this.#attempts += 1;
    const pool = this.#pool;
    // A fresh prepare per attempt: a new free port if the old one was taken meanwhile.
    const prepared = await this.#engines.prepare(pool, {
      modelPath: this.#model.local_path,
      replicaId: this.replicaId,
      binary: this.#binary,
    });
    const wrapper = await this.#wrapper;
    const url = `http://${prepared.host}:${prepared.port}`;
    // First asked for by the first health probe, i.e. after the spawn (see PoolManager.engineClient).
    let clientP: Promise<LlamaServerClient> | undefined;
    const client = (): Promise<LlamaServerClient> => (clientP ??= this.#clientFor(url));
    const s = this.#supervision;
    const proc = new EngineProcess({
      name: `${this.poolId}-${this.replicaId}`,
      poolId: this.poolId,
      replicaId: this.replicaId,
      binaryPath: prepared.binary_path,
      args: prepared.flags,
      // PCI bus order makes the mask's indices nvidia-smi's (CUDA otherwise numbers the fastest
      // GPU first), so `device_mask` and the reported free memory name the same devices.
      env:
        prepared.device_mask !== undefined
          ? { ...this.#engineEnv, CUDA_DEVICE_ORDER: 'PCI_BUS_ID', CUDA_VISIBLE_DEVICES: prepared.device_mask }
          : this.#engineEnv,
      health: async (signal) => {
        const h = await (await client()).health(signal);
        this.#metrics.healthChecks.inc({ pool_id: this.poolId, result: h });
        return h;
      },
      logDir: this.#runtime.logs,
      pidDir: this.#runtime.pids,
      logger: this.#log.child({ component: 'engine', attempt: this.#attempts }),
      wrapper,
      readinessTimeoutMs: s.readinessTimeoutMs,
      readinessIntervalMs: s.readinessIntervalMs,
      onSpawn: () => {
        if (this.#state === 'running') this.#events.spawned();
      },
      ...(this.#engineLog !== undefined ? { log: this.#engineLog } : {}),
    });
    return { proc, meta: { prepared, client } };
  }

  /** Reads `/props` and what the engine serves, binds the engine, writes its handoff file, then (once the daemon serves) announces it. */
  async #bind(proc: EngineProcess, { prepared, client }: AttemptMeta): Promise<void> {
    let props;
    let capabilities: PoolCapability[];
    try {
      const engineClient = await client();
      props = await engineClient.props();
      capabilities = await engineCapabilities(engineClient, prepared.flags);
    } catch (err) {
      // The engine died right after /health 200; its exit event handles the restart.
      this.#log.warn({ err, pid: proc.pid }, 'engine healthy but /props or the /infill probe failed');
      return;
    }
    const pid = proc.pid;
    if (this.#state !== 'running' || proc.state !== 'ready' || pid === undefined) return;
    const engine: ReadyEngine = {
      url: `http://${prepared.host}:${prepared.port}`,
      engine_version: props.build_info,
      engine_fingerprint: prepared.engine_fingerprint,
      ...(prepared.build_provenance.patches !== undefined
        ? { engine_patches: [...prepared.build_provenance.patches] }
        : {}),
      slots_total: props.total_slots,
      ctx: props.n_ctx,
      pid,
      capabilities,
    };
    this.#events.bound(engine);
    const bound: BoundEngine = {
      proc,
      record: managedHandoff({
        poolId: this.poolId,
        replicaId: this.replicaId,
        engineVersion: engine.engine_version,
        url: engine.url,
        pid,
        model: { id: this.#model.id, path: this.#model.local_path },
        slotsTotal: engine.slots_total,
        deviceMask: prepared.device_mask,
        flags: prepared.flags,
      }),
      path: undefined,
    };
    this.#bound = bound;
    try {
      bound.path = await writeHandoffFile(this.#runtime.engines, bound.record);
    } catch (err) {
      this.#log.error({ err }, 'writing the handoff file failed');
    }
    // The engine exited or the run stopped while the file was written: it must not outlive the engine.
    if (this.#bound !== bound) {
      if (bound.path !== undefined) await this.#removeHandoff(bound.path, 'engine gone while its handoff was written');
      return;
    }
    // A pool reported ready must be reachable: wait for the HTTP API when the engine was faster.
    await this.#serving;
    if (this.#state !== 'running' || this.#bound !== bound || proc.state !== 'ready') return;
    this.#events.ready(engine);
  }

  #removeHandoff(path: string, reason: string): Promise<void> {
    return removeHandoffFile(path).catch((err: unknown) =>
      this.#log.warn({ err, path, reason }, 'removing the handoff file failed'),
    );
  }
}
