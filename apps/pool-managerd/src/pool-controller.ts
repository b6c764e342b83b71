import type { Logger } from 'pino';
import type { HandoffFile, PoolConfig, ResolvedModel } from '@llama-orch/contracts';
import type { EngineBinary, EngineProvisioner } from '@llama-orch/engine-provisioner';
import type { ModelProvisioner } from '@llama-orch/model-provisioner';
import type { LlamaServerClient } from '@llama-orch/llamacpp-adapter';
import { BackoffPolicy } from './backoff.js';
import { CircuitBreaker } from './circuit-breaker.js';
import { systemClock, type Clock } from './clock.js';
import { EngineMonitor, probeExternalEngine } from './engine-monitor.js';
import { EngineProcess } from './engine-process.js';
import { HandoffError, PoolBusyError } from './errors.js';
import { handoffPath, removeHandoffFile, writeHandoffFile } from './handoff-file.js';
import type { PoolManagerMetrics } from './metrics.js';
import type { PoolRegistry } from './registry.js';
import { RestartLimiter } from './restart-limiter.js';
import type { RotatingLogOptions } from './rotating-log.js';
import type { RuntimeDir } from './runtime-dir.js';
import { Supervisor } from './supervisor.js';

/** Supervision numbers (DESIGN §5). Tests shrink them; the daemon uses {@link DEFAULT_SUPERVISION}. */
export interface SupervisionSettings {
  /** First restart delay, ms. @default 1000 */
  backoffBaseMs: number;
  /** Largest restart delay, ms. @default 60000 */
  backoffMaxMs: number;
  /** ± relative jitter. @default 0.1 */
  jitter: number;
  random?: () => number;
  /** Consecutive failures that open the breaker. @default 5 */
  breakerThreshold: number;
  /** Open breaker cool-down before a half-open trial (also the provisioning retry delay), ms. @default 300000 */
  breakerCooldownMs: number;
  /** Restart storm limit: restarts per window. @default 10 */
  restartMax: number;
  /** @default 60000 */
  restartWindowMs: number;
  /** Ready this long = stable: backoff reset, breaker closed, ms. @default 60000 */
  stableAfterMs: number;
  /** SIGTERM → SIGKILL grace, ms. @default 5000 */
  stopTimeoutMs: number;
  /** Spawn → /health 200 limit, ms. @default 120000 */
  readinessTimeoutMs: number;
  /** /health poll interval while loading, ms. @default 50 */
  readinessIntervalMs: number;
  clock?: Clock;
}

export const DEFAULT_SUPERVISION: Readonly<SupervisionSettings> = Object.freeze({
  backoffBaseMs: 1000,
  backoffMaxMs: 60_000,
  jitter: 0.1,
  breakerThreshold: 5,
  breakerCooldownMs: 300_000,
  restartMax: 10,
  restartWindowMs: 60_000,
  stableAfterMs: 60_000,
  stopTimeoutMs: 5000,
  readinessTimeoutMs: 120_000,
  readinessIntervalMs: 50,
});

export interface PoolControllerOptions {
  pool: PoolConfig;
  registry: PoolRegistry;
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
  engineLog?: RotatingLogOptions;
  /** Probe interval of an adopted external engine, ms. @default 2000 */
  externalProbeMs?: number;
  /** How long an adopted engine may take to answer /health 200, ms. @default 30000 */
  adoptTimeoutMs?: number;
  /** Readiness is published only after this settles (the daemon's HTTP API listens). @default settled */
  serving?: Promise<void>;
}

export type PoolControllerState = 'idle' | 'running' | 'closing' | 'closed';

const REPLICA_ID = 'r0';

function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/**
 * Drives one configured pool: provisioning (engine build + model fetch, concurrently) → a
 * {@link Supervisor} running {@link EngineProcess}es → handoff file + registry updates; drain,
 * reload with rollback, and adoption of an external engine when the pool has none.
 */
export class PoolController {
  readonly poolId: string;
  readonly replicaId = REPLICA_ID;
  #state: PoolControllerState = 'idle';
  readonly #o: PoolControllerOptions;
  readonly #log: Logger;
  readonly #clock: Clock;
  #modelRef: string;
  #sha256: string | undefined;
  #model: ResolvedModel | undefined;
  /** Binary from provisioning, reused by every start attempt (no repeated source/toolchain probes). */
  #binary: EngineBinary | undefined;
  #supervisor: Supervisor | undefined;
  #boundProc: EngineProcess | undefined;
  #handoff: string | undefined;
  #operation: 'drain' | 'reload' | undefined;
  #provisioning: AbortController | undefined;
  #retryTimer: NodeJS.Timeout | undefined;
  /** Shown as last_error even after the next ready (reload rollback must stay visible). */
  #stickyError: string | undefined;
  #external: { monitor: EngineMonitor; path: string; handoff: HandoffFile } | undefined;
  #closing: Promise<void> | undefined;
  #run: Promise<void> | undefined;
  /** Binding of the latest ready engine (props, registry, handoff file) in progress. */
  #readyTask: Promise<void> = Promise.resolve();
  readonly #firstSpawn: Promise<void>;
  #markFirstSpawn!: () => void;

  constructor(options: PoolControllerOptions) {
    this.#o = options;
    this.poolId = options.pool.id;
    this.#log = options.logger.child({ poolId: this.poolId });
    this.#clock = options.supervision.clock ?? systemClock;
    this.#modelRef = options.pool.model;
    this.#sha256 = options.pool.sha256;
    this.#firstSpawn = new Promise((resolve) => {
      this.#markFirstSpawn = resolve;
    });
    options.registry.register(this.poolId, {
      managed: true,
      models: [options.pool.model],
      deterministic: options.pool.determinism,
      ctx: options.pool.ctx,
      slotsTotal: options.pool.determinism ? 1 : options.pool.slots,
      state: 'provisioning',
      reason: 'waiting to provision',
    });
  }

  get state(): PoolControllerState {
    return this.#state;
  }

  /** Model file in use (pinned against cache eviction). */
  get modelId(): string | undefined {
    return this.#model?.id;
  }

  get handoffFile(): string {
    return handoffPath(this.#o.runtime.engines, this.poolId, REPLICA_ID);
  }

  /** pid of the engine this controller runs or adopted, if any. */
  get enginePid(): number | undefined {
    return this.#boundProc?.pid ?? this.#supervisor?.current?.pid ?? this.#external?.handoff.pid;
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
    if (this.#state !== 'idle') return this.#run ?? Promise.resolve();
    this.#state = 'running';
    this.#run = this.#provisionAndRun();
    return this.#run;
  }

  async #provisionAndRun(): Promise<void> {
    const ac = new AbortController();
    this.#provisioning = ac;
    let model: ResolvedModel;
    try {
      model = await this.#provision(this.#modelRef, this.#sha256, ac.signal, true);
    } catch (err) {
      this.#markFirstSpawn();
      if (this.#state !== 'running' || ac.signal.aborted) return;
      const message = `provisioning failed: ${errorMessage(err)}`;
      this.#log.error({ err }, 'pool provisioning failed');
      this.#o.registry.setLastError(this.poolId, message);
      this.#safeTransition('failed', `${message}; retry in ${Math.round(this.#o.supervision.breakerCooldownMs / 1000)} s`);
      this.#retryTimer = setTimeout(() => {
        this.#retryTimer = undefined;
        if (this.#state === 'running' && this.#o.registry.state(this.poolId) === 'failed' && this.#operation === undefined && this.#external === undefined) {
          this.#run = this.#provisionAndRun();
        }
      }, this.#o.supervision.breakerCooldownMs);
      this.#retryTimer.unref();
      return;
    } finally {
      if (this.#provisioning === ac) this.#provisioning = undefined;
    }
    if (this.#state !== 'running') return;
    this.#model = model;
    this.#o.registry.setModels(this.poolId, [this.#modelRef, model.id]);
    this.#startSupervisor(model, false).catch(() => undefined);
  }

  /** Engine binary and model, concurrently, with progress in the registry. */
  async #provision(ref: string, sha256: string | undefined, signal: AbortSignal, withEngine: boolean): Promise<ResolvedModel> {
    const { registry, metrics, pool } = this.#o;
    const progress = { engine: withEngine ? 0 : 1, model: 0 } as { engine: number; model: number; model_bytes_done?: number; model_bytes_total?: number };
    if (withEngine) this.#safeTransition('provisioning', `provisioning engine and model ${ref}`);
    registry.setProgress(this.poolId, progress);
    let lastLog = 0;
    const logProgress = (): void => {
      registry.setProgress(this.poolId, progress);
      const now = Date.now();
      if (now - lastLog >= 5000) {
        lastLog = now;
        this.#log.info({ progress }, 'provisioning progress');
      }
    };
    const t0 = performance.now();
    const observe = (phase: string, outcome: string): void => {
      metrics.provisioningSeconds.observe({ pool_id: this.poolId, phase, outcome }, (performance.now() - t0) / 1000);
    };
    const enginePromise = withEngine
      ? this.#o.engines
          .ensureBinary(pool, {
            signal,
            onProgress: (p) => {
              progress.engine = p.fraction;
              logProgress();
            },
          })
          .then(
            (bin) => {
              this.#binary = bin;
              progress.engine = 1;
              logProgress();
              observe('engine', 'ok');
              return bin;
            },
            (err: unknown) => {
              observe('engine', 'error');
              throw err;
            },
          )
      : Promise.resolve(undefined);
    const modelPromise = this.#o.models
      .ensure(ref, {
        ...(sha256 !== undefined ? { sha256 } : {}),
        signal,
        onProgress: (p) => {
          progress.model_bytes_done = p.bytes_done;
          if (p.bytes_total !== undefined && p.bytes_total > 0) {
            progress.model_bytes_total = p.bytes_total;
            progress.model = Math.min(1, p.bytes_done / p.bytes_total);
          }
          logProgress();
        },
      })
      .then(
        (m) => {
          progress.model = 1;
          logProgress();
          observe('model', 'ok');
          return m;
        },
        (err: unknown) => {
          observe('model', 'error');
          throw err;
        },
      );
    const [, model] = await Promise.all([enginePromise, modelPromise]);
    this.#log.info({ model: model.id, path: model.local_path, ms: Math.round(performance.now() - t0) }, 'pool provisioned');
    return model;
  }

  /**
   * Starts a supervisor for `model`. The promise settles on the first outcome (ready, or — with
   * `failFast` — the first failed start, for reload rollback).
   */
  #startSupervisor(model: ResolvedModel, failFast: boolean): Promise<void> {
    const { pool, registry, supervision: s, metrics } = this.#o;
    const clock = this.#clock;
    let attempts = 0;
    const sup = new Supervisor({
      name: `${this.poolId}-${REPLICA_ID}`,
      logger: this.#log.child({ component: 'supervisor' }),
      clock,
      failFast,
      stableAfterMs: s.stableAfterMs,
      stopTimeoutMs: s.stopTimeoutMs,
      backoff: new BackoffPolicy({ baseMs: s.backoffBaseMs, maxMs: s.backoffMaxMs, jitter: s.jitter, ...(s.random ? { random: s.random } : {}) }),
      breaker: new CircuitBreaker({ threshold: s.breakerThreshold, cooldownMs: s.breakerCooldownMs, now: () => clock.now() }),
      limiter: new RestartLimiter({ max: s.restartMax, windowMs: s.restartWindowMs, now: () => clock.now() }),
      createProcess: async () => {
        attempts += 1;
        // A fresh prepare per attempt: a new free port if the old one was taken meanwhile.
        const prepared = await this.#o.engines.prepare(pool, { modelPath: model.local_path, replicaId: REPLICA_ID, binary: this.#binary });
        const wrapper = await this.#o.wrapper;
        // First asked for by the first health probe, i.e. after the spawn (see PoolManager.engineClient).
        let clientP: Promise<LlamaServerClient> | undefined;
        const client = (): Promise<LlamaServerClient> => (clientP ??= this.#o.clientFor(`http://${prepared.host}:${prepared.port}`));
        return {
          proc: new EngineProcess({
            name: `${this.poolId}-${REPLICA_ID}`,
            poolId: this.poolId,
            replicaId: REPLICA_ID,
            binaryPath: prepared.binary_path,
            args: prepared.flags,
            // PCI bus order makes the mask's indices nvidia-smi's (CUDA otherwise numbers the fastest
            // GPU first), so `device_mask` and the reported free memory name the same devices.
            env: prepared.device_mask !== undefined
              ? { ...this.#o.engineEnv, CUDA_DEVICE_ORDER: 'PCI_BUS_ID', CUDA_VISIBLE_DEVICES: prepared.device_mask }
              : this.#o.engineEnv,
            health: async (signal) => {
              const h = await (await client()).health(signal);
              metrics.healthChecks.inc({ pool_id: this.poolId, result: h });
              return h;
            },
            logDir: this.#o.runtime.logs,
            pidDir: this.#o.runtime.pids,
            logger: this.#log.child({ component: 'engine', attempt: attempts }),
            wrapper,
            readinessTimeoutMs: s.readinessTimeoutMs,
            readinessIntervalMs: s.readinessIntervalMs,
            onSpawn: () => this.#markFirstSpawn(),
            ...(this.#o.engineLog !== undefined ? { log: this.#o.engineLog } : {}),
          }),
          meta: { prepared, client },
        };
      },
    });
    this.#supervisor = sup;
    const spawnStarted = new Map<number, number>();
    sup.on('starting', ({ attempt, restart }) => {
      if (this.#supervisor !== sup) return;
      if (restart) {
        registry.countRestart(this.poolId);
        metrics.restarts.inc({ pool_id: this.poolId });
      }
      spawnStarted.set(attempt, performance.now());
      this.#safeTransition('starting', restart ? `restarting engine (attempt ${attempt})` : 'starting engine');
    });
    sup.on('ready', (proc, meta) => {
      if (this.#supervisor !== sup) return;
      this.#readyTask = this.#onReady(sup, proc, meta.prepared, meta.client, model).catch((err: unknown) => {
        this.#log.error({ err }, 'binding the ready engine failed');
      });
    });
    sup.on('exited', ({ exit, proc }) => {
      if (this.#supervisor !== sup) return;
      const what = exit.signal !== null ? `signal ${exit.signal}` : `code ${exit.code}`;
      this.#log.warn({ pid: proc.pid, code: exit.code, signal: exit.signal }, 'engine exited unexpectedly');
      void this.#unbind(`engine exited (${what})`);
      this.#safeTransition('starting', `engine exited (${what}); restart pending`);
    });
    sup.on('failure', ({ error, delayMs }) => {
      this.#markFirstSpawn();
      if (this.#supervisor !== sup) return;
      registry.setLastError(this.poolId, error);
      if (delayMs !== undefined) this.#safeTransition('starting', `engine failed; restart in ${delayMs} ms: ${error}`);
    });
    sup.on('open', ({ error, retryAt }) => {
      if (this.#supervisor !== sup) return;
      registry.setLastError(this.poolId, `circuit open after ${s.breakerThreshold} consecutive failures: ${error}`);
      this.#safeTransition('failed', `circuit open; next trial at ${new Date(retryAt).toISOString()}`);
    });
    sup.on('breaker', (b) => {
      if (this.#supervisor !== sup) return;
      registry.setBreaker(this.poolId, b);
    });
    return sup.start();
  }

  async #onReady(sup: Supervisor, proc: EngineProcess, prepared: { engine_version: string; engine_fingerprint: string; flags: string[]; host: string; port: number; device_mask?: string }, client: () => Promise<LlamaServerClient>, model: ResolvedModel): Promise<void> {
    const { registry } = this.#o;
    let props;
    try {
      props = await (await client()).props();
    } catch (err) {
      // The engine died right after /health 200; its exit event handles the restart.
      this.#log.warn({ err, pid: proc.pid }, 'engine healthy but /props failed');
      return;
    }
    if (this.#supervisor !== sup || proc.state !== 'ready' || proc.pid === undefined) return;
    const url = `http://${prepared.host}:${prepared.port}`;
    registry.bindEngine(this.poolId, {
      url,
      engine_version: props.build_info,
      engine_fingerprint: prepared.engine_fingerprint,
      slots_total: props.total_slots,
      ctx: props.n_ctx,
      pid: proc.pid,
      mode: 'managed',
    });
    this.#boundProc = proc;
    try {
      this.#handoff = await writeHandoffFile(this.#o.runtime.engines, {
        pool_id: this.poolId,
        replica_id: REPLICA_ID,
        engine: 'llamacpp',
        engine_version: props.build_info,
        url,
        pid: proc.pid,
        model: { id: model.id, path: model.local_path },
        slots_total: props.total_slots,
        ...(prepared.device_mask !== undefined ? { device_mask: prepared.device_mask } : {}),
        flags: prepared.flags,
        provisioning_mode: 'managed',
        written_at: new Date().toISOString(),
      });
    } catch (err) {
      this.#log.error({ err }, 'writing the handoff file failed');
    }
    // A pool reported ready must be reachable: wait for the HTTP API when the engine was faster.
    await this.#o.serving;
    if (this.#supervisor !== sup || proc.state !== 'ready') return;
    registry.setLastError(this.poolId, this.#stickyError);
    if (this.#operation === undefined) this.#safeTransition('ready', 'engine healthy');
    this.#log.info({ pid: proc.pid, url, engineVersion: props.build_info, slots: props.total_slots, human: `pool ${this.poolId} ready on ${url}` }, 'pool ready');
  }

  /** Removes the engine from the registry at once and deletes its handoff file (awaitable). */
  #unbind(reason: string): Promise<void> {
    this.#boundProc = undefined;
    if (this.#o.registry.engine(this.poolId) !== undefined) this.#o.registry.unbindEngine(this.poolId);
    const path = this.#handoff;
    this.#handoff = undefined;
    if (path === undefined) return Promise.resolve();
    return removeHandoffFile(path).catch((err: unknown) => this.#log.warn({ err, path, reason }, 'removing the handoff file failed'));
  }

  async #stopEngine(reason: string): Promise<void> {
    const sup = this.#supervisor;
    this.#supervisor = undefined;
    await this.#unbind(reason);
    if (this.#external !== undefined) {
      this.#external.monitor.close();
      this.#external = undefined;
    }
    if (sup !== undefined) await sup.stop(this.#o.supervision.stopTimeoutMs);
  }

  /** Waits until no lease is held or the deadline passes; then aborts what is left. */
  async #waitForLeases(deadlineMs: number): Promise<void> {
    const { registry } = this.#o;
    const until = Date.now() + deadlineMs;
    while (registry.activeLeases(this.poolId) > 0 && Date.now() < until) {
      await new Promise((r) => setTimeout(r, 20).unref());
    }
    const left = registry.activeLeases(this.poolId);
    if (left > 0) {
      this.#log.warn({ leases: left, deadlineMs }, 'drain deadline passed; aborting in-flight work');
      registry.abortLeases(this.poolId, 'drain deadline passed');
    }
  }

  /**
   * Drain: no new leases, in-flight work runs until `deadlineMs`, then the engine stops and the pool
   * is `stopped`. Returns the promise of the whole operation (the HTTP route does not await it).
   */
  drain(deadlineMs: number): Promise<void> {
    this.#claim('drain');
    const state = this.#o.registry.state(this.poolId);
    if (state === 'ready') this.#safeTransition('draining', `draining; deadline ${deadlineMs} ms`);
    return (async () => {
      try {
        this.#provisioning?.abort(new Error('drained'));
        if (this.#retryTimer !== undefined) clearTimeout(this.#retryTimer);
        await this.#waitForLeases(deadlineMs);
        await this.#stopEngine('drained');
        this.#safeTransition('stopped', 'drained');
        this.#log.info({ human: `pool ${this.poolId} drained and stopped` }, 'pool drained');
      } finally {
        this.#operation = undefined;
      }
    })();
  }

  /**
   * Reload: drain (model fetched meanwhile), stop the old engine, start one with the new model; on
   * any failure restore the old model and engine (pool ready again, `last_error` says what failed).
   */
  reload(ref: string, sha256: string | undefined, deadlineMs: number): Promise<void> {
    const state = this.#o.registry.state(this.poolId);
    if (state === 'provisioning' || state === 'starting') throw new PoolBusyError(this.poolId, state);
    this.#claim('reload');
    const wasServing = state === 'ready';
    const old = { ref: this.#modelRef, sha256: this.#sha256, model: this.#model };
    if (wasServing) this.#safeTransition('draining', `reload to ${ref}: draining`);
    return (async () => {
      try {
        await this.#reload(ref, sha256, deadlineMs, wasServing, old);
      } finally {
        this.#operation = undefined;
      }
    })();
  }

  async #reload(ref: string, sha256: string | undefined, deadlineMs: number, wasServing: boolean, old: { ref: string; sha256: string | undefined; model: ResolvedModel | undefined }): Promise<void> {
    const { registry } = this.#o;
    this.#log.info({ from: old.ref, to: ref, human: `reloading pool ${this.poolId}: ${old.ref} → ${ref}` }, 'reload started');
    const ac = new AbortController();
    this.#provisioning = ac;
    const modelResult = this.#provision(ref, sha256, ac.signal, !wasServing).then(
      (m) => ({ ok: true as const, m }),
      (err: unknown) => ({ ok: false as const, err }),
    );
    if (wasServing) await this.#waitForLeases(deadlineMs);
    const provisioned = await modelResult;
    if (this.#provisioning === ac) this.#provisioning = undefined;
    if (this.#state !== 'running') return;
    if (!provisioned.ok) {
      const message = `reload to ${ref} failed: ${errorMessage(provisioned.err)}; still serving ${old.ref}`;
      this.#log.error({ err: provisioned.err }, 'reload failed before the engine swap; rolled back');
      this.#stickyError = message;
      registry.setLastError(this.poolId, message);
      if (wasServing && registry.engine(this.poolId) !== undefined) this.#safeTransition('ready', 'reload rolled back');
      else if (!wasServing) this.#safeTransition(registry.state(this.poolId) === 'stopped' ? 'stopped' : 'failed', message);
      return;
    }
    await this.#stopEngine('reload');
    this.#safeTransition('starting', `reload: starting engine with ${ref}`);
    try {
      await this.#startSupervisor(provisioned.m, true);
      await this.#readyTask;
      this.#modelRef = ref;
      this.#sha256 = sha256;
      this.#model = provisioned.m;
      this.#stickyError = undefined;
      registry.setLastError(this.poolId, undefined);
      registry.setModels(this.poolId, [ref, provisioned.m.id]);
      this.#operation = undefined;
      // The ready event ran while the operation was still set; publish readiness now.
      if (registry.engine(this.poolId) !== undefined) this.#safeTransition('ready', `reloaded with ${ref}`);
      this.#log.info({ model: ref, human: `pool ${this.poolId} now serves ${ref}` }, 'reload done');
    } catch (err) {
      if (this.#state !== 'running') return;
      const message = `reload to ${ref} failed: ${errorMessage(err)}; rolled back to ${old.ref}`;
      this.#log.error({ err }, 'new engine failed; rolling back');
      this.#stickyError = message;
      registry.setLastError(this.poolId, message);
      await this.#stopEngine('reload rollback');
      if (old.model === undefined) {
        this.#safeTransition('failed', message);
        return;
      }
      this.#safeTransition('starting', 'reload rolled back: restarting the previous engine');
      this.#operation = undefined;
      await this.#startSupervisor(old.model, false).catch(() => undefined);
    }
  }

  /** Whether an external engine may be adopted into this pool (it has no engine of its own). */
  canAdopt(): boolean {
    const state = this.#o.registry.state(this.poolId);
    return this.#operation === undefined && this.#boundProc === undefined && (state === 'stopped' || state === 'failed' || this.#external !== undefined);
  }

  /** Adopts an external engine into this configured pool (see {@link canAdopt}). */
  async adopt(path: string, handoff: HandoffFile): Promise<void> {
    if (!this.canAdopt()) {
      throw new HandoffError(`pool ${this.poolId} is managed here and has its own engine (state ${this.#o.registry.state(this.poolId)})`, { poolId: this.poolId });
    }
    const client = await this.#o.clientFor(handoff.url);
    const binding = await probeExternalEngine(client, handoff, {
      timeoutMs: this.#o.adoptTimeoutMs ?? 30_000,
      onHealth: (h) => this.#o.metrics.healthChecks.inc({ pool_id: this.poolId, result: h }),
    });
    // Supervision of our own (failing) engine stops: the operator's engine takes its place.
    if (this.#supervisor !== undefined) await this.#stopEngine('adopting an external engine');
    if (this.#retryTimer !== undefined) clearTimeout(this.#retryTimer);
    this.#provisioning?.abort(new Error('external engine adopted'));
    this.#external?.monitor.close();
    const { registry } = this.#o;
    registry.bindEngine(this.poolId, binding);
    registry.setModels(this.poolId, [handoff.model.id]);
    registry.setLastError(this.poolId, undefined);
    this.#safeTransition('ready', `adopted external engine ${handoff.url}`);
    const monitor = new EngineMonitor({
      client,
      logger: this.#log,
      ...(this.#o.externalProbeMs !== undefined ? { intervalMs: this.#o.externalProbeMs } : {}),
      onHealth: (h) => this.#o.metrics.healthChecks.inc({ pool_id: this.poolId, result: h }),
      onDown: (why) => {
        registry.unbindEngine(this.poolId);
        registry.setLastError(this.poolId, why);
        this.#safeTransition('failed', why);
      },
      onUp: () => {
        registry.bindEngine(this.poolId, binding);
        registry.setLastError(this.poolId, undefined);
        this.#safeTransition('ready', 'external engine healthy again');
      },
    });
    this.#external = { monitor, path, handoff };
  }

  /** Handoff file removed: an adopted engine is released; our own file is written again. */
  async handoffRemoved(path: string): Promise<void> {
    if (this.#external !== undefined && this.#external.path === path) {
      this.#external.monitor.close();
      this.#external = undefined;
      this.#o.registry.unbindEngine(this.poolId);
      this.#safeTransition('stopped', 'external handoff file removed');
      return;
    }
    const proc = this.#boundProc;
    if (path === this.#handoff && proc?.state === 'ready') {
      // Our engine still runs: the file is an output of this daemon, so it is restored.
      this.#log.warn({ path }, 'handoff file of a running managed engine was removed; writing it again');
      const engine = this.#o.registry.engine(this.poolId);
      if (engine !== undefined && this.#model !== undefined && proc.pid !== undefined) {
        this.#handoff = await writeHandoffFile(this.#o.runtime.engines, {
          pool_id: this.poolId,
          replica_id: REPLICA_ID,
          engine: 'llamacpp',
          engine_version: engine.engine_version,
          url: engine.url,
          pid: proc.pid,
          model: { id: this.#model.id, path: this.#model.local_path },
          slots_total: engine.slots_total,
          flags: [...proc.options.args],
          provisioning_mode: 'managed',
          written_at: new Date().toISOString(),
        });
      }
    }
  }

  /** Whether `handoff` describes the engine this controller runs (its own file, seen by the watcher). */
  ownsHandoff(handoff: HandoffFile): boolean {
    return handoff.provisioning_mode === 'managed' && this.#boundProc?.pid === handoff.pid;
  }

  /** Stops provisioning, supervision and the engine; removes the handoff file. Idempotent. */
  close(): Promise<void> {
    this.#closing ??= (async () => {
      this.#state = 'closing';
      this.#markFirstSpawn();
      if (this.#retryTimer !== undefined) clearTimeout(this.#retryTimer);
      this.#provisioning?.abort(new Error('pool-managerd shutting down'));
      this.#o.registry.abortLeases(this.poolId, 'pool-managerd shutting down');
      await this.#stopEngine('shutdown');
      this.#safeTransition('stopped', 'pool-managerd shut down');
      this.#state = 'closed';
    })();
    return this.#closing;
  }

  #claim(operation: 'drain' | 'reload'): void {
    if (this.#operation !== undefined) throw new PoolBusyError(this.poolId, this.#operation);
    this.#operation = operation;
  }

  /** Transitions, logging (not throwing) a disallowed one: events can race with operations. */
  #safeTransition(to: Parameters<PoolRegistry['transition']>[1], reason: string): void {
    try {
      this.#o.registry.transition(this.poolId, to, reason);
    } catch (err) {
      this.#log.warn({ err, to, reason }, 'pool state transition skipped');
    }
  }
}
