import { readdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { HandoffFileSchema, type HandoffFile, type PoolConfig } from '@llama-orch/contracts';
import type { EngineProvisioner } from '@llama-orch/engine-provisioner';
import type { ModelProvisioner } from '@llama-orch/model-provisioner';
import type { LlamaServerClient } from '@llama-orch/llamacpp-adapter';
import type { EngineClients } from './engine-clients.js';
import { EngineMonitor, probeExternalEngine } from './engine-monitor.js';
import { HandoffError, PoolBusyError, PoolManagerError, PoolNotFoundError, PoolNotManagedError } from './errors.js';
import { HandoffWatcher } from './handoff-watcher.js';
import { PoolManagerMetrics } from './metrics.js';
import { sweepStalePidFiles } from './pid-files.js';
import { PoolController, type SupervisionSettings } from './pool-controller.js';
import { PoolRegistry } from './registry.js';
import type { RotatingLogOptions } from './rotating-log.js';
import type { RuntimeDir } from './runtime-dir.js';

export interface PoolManagerOptions {
  nodeId: string;
  pools: readonly PoolConfig[];
  runtime: RuntimeDir;
  logger: Logger;
  engines: Pick<EngineProvisioner, 'ensureBinary' | 'prepare'>;
  models: Pick<ModelProvisioner, 'ensure'>;
  /** Complete, scrubbed environment for engine processes. */
  engineEnv: Readonly<Record<string, string>>;
  /**
   * Exec-in-place prefix that ties engines to this process's life (setpriv); [] when unavailable.
   * May be a promise (main verifies setpriv while the pools provision); awaited before each spawn.
   */
  wrapper: readonly string[] | Promise<readonly string[]>;
  supervision: SupervisionSettings;
  engineLog?: RotatingLogOptions;
  /** Probe interval of adopted external engines, ms. @default 2000 */
  externalProbeMs?: number;
  /** How long an adopted engine may take to answer /health 200, ms. @default 30000 */
  adoptTimeoutMs?: number;
  /** Handoff watcher stability threshold, ms. @default 100 */
  handoffStabilityMs?: number;
  /**
   * Settles once the daemon's HTTP API listens. Engines are provisioned, spawned and checked before
   * it (their start overlaps the daemon's own start-up), but no pool is reported ready and no
   * external engine is adopted until it settled, so a ready pool can always be reached.
   * @default settled (in-process use: the caller listens first)
   */
  serving?: Promise<void>;
}

interface AdoptedPool {
  monitor: EngineMonitor;
  path: string;
  handoff: HandoffFile;
}

/**
 * Everything pool-managerd runs: one {@link PoolController} per configured pool, the handoff
 * watcher (adoption of external engines), the registry, engine HTTP clients and metrics.
 * `start()` sweeps orphans of an earlier run, then provisions all pools concurrently.
 */
export class PoolManager {
  readonly nodeId: string;
  readonly registry = new PoolRegistry();
  readonly metrics: PoolManagerMetrics;
  readonly #o: PoolManagerOptions;
  readonly #log: Logger;
  readonly #controllers = new Map<string, PoolController>();
  readonly #adopted = new Map<string, AdoptedPool>();
  readonly #clients = new Map<string, LlamaServerClient>();
  #engineClients: Promise<EngineClients> | undefined;
  #loadedClients: EngineClients | undefined;
  readonly #watcher: HandoffWatcher;
  #state: 'idle' | 'running' | 'closing' | 'closed' = 'idle';
  #closing: Promise<void> | undefined;

  constructor(options: PoolManagerOptions) {
    this.#o = options;
    this.nodeId = options.nodeId;
    this.#log = options.logger.child({ component: 'pool-manager' });
    this.metrics = new PoolManagerMetrics(this.registry);
    for (const pool of options.pools) {
      this.#controllers.set(
        pool.id,
        new PoolController({
          pool,
          registry: this.registry,
          engines: options.engines,
          models: options.models,
          runtime: options.runtime,
          logger: options.logger,
          metrics: this.metrics,
          engineEnv: options.engineEnv,
          wrapper: options.wrapper,
          clientFor: (url) => this.engineClient(url),
          supervision: options.supervision,
          ...(options.engineLog !== undefined ? { engineLog: options.engineLog } : {}),
          ...(options.externalProbeMs !== undefined ? { externalProbeMs: options.externalProbeMs } : {}),
          ...(options.adoptTimeoutMs !== undefined ? { adoptTimeoutMs: options.adoptTimeoutMs } : {}),
          ...(options.serving !== undefined ? { serving: options.serving } : {}),
        }),
      );
    }
    this.#watcher = new HandoffWatcher({
      dir: options.runtime.engines,
      logger: this.#log.child({ component: 'handoff-watcher' }),
      ...(options.handoffStabilityMs !== undefined ? { stabilityMs: options.handoffStabilityMs } : {}),
      onHandoff: (path, h) => this.#onHandoff(path, h),
      onRemoved: (path) => this.#onHandoffRemoved(path),
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
    this.#engineClients ??= import('./engine-clients.js').then((m) => {
      this.#loadedClients = m.createEngineClients();
      return this.#loadedClients;
    });
    await this.#engineClients;
    return this.clientFor(url);
  }

  /**
   * Synchronous {@link engineClient} for request handlers. Every bound engine was reached through
   * `engineClient` first, so this only throws (503) for a URL no engine of this daemon has.
   */
  clientFor(url: string): LlamaServerClient {
    let c = this.#clients.get(url);
    if (c === undefined) {
      const clients = this.#loadedClients;
      if (clients === undefined) throw new PoolManagerError('POOL_UNREADY', 'POOL_UNREADY', `no engine of this daemon was reached at ${url}`, { url });
      c = clients.create(url);
      this.#clients.set(url, c);
    }
    return c;
  }

  controller(poolId: string): PoolController {
    const c = this.#controllers.get(poolId);
    if (c === undefined) throw new PoolNotFoundError(poolId);
    return c;
  }

  hasController(poolId: string): boolean {
    return this.#controllers.has(poolId);
  }

  /** Model ids served by running pools (never evicted from the model cache). */
  modelInUse(id: string): boolean {
    for (const c of this.#controllers.values()) if (c.modelId === id) return true;
    return false;
  }

  /**
   * Kills orphans of an earlier run (stale PID files), removes its managed handoff files, provisions
   * every pool concurrently (not awaited: pools report progress) and starts the handoff watcher once
   * the daemon serves (see {@link PoolManagerOptions.serving}).
   */
  async start(): Promise<void> {
    if (this.#state !== 'idle') return;
    this.#state = 'running';
    const killed = sweepStalePidFiles(this.#o.runtime.pids, this.#log);
    if (killed.length > 0) this.#log.warn({ pids: killed }, 'orphan engines of a previous run killed');
    this.#removeStaleManagedHandoffs();
    // Pools first: the engines' own start-up is the long pole, and our handoff files are
    // recognised (same pid) whenever the watcher's initial scan sees them.
    for (const c of this.#controllers.values()) {
      void c.start();
    }
    await this.#o.serving;
    if (this.#state !== 'running') return;
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
      Promise.all([...this.#controllers.values()].map((c) => c.firstSpawn)),
      new Promise<void>((resolve) => {
        timer = setTimeout(resolve, maxMs);
        timer.unref();
      }),
    ]);
    clearTimeout(timer);
  }

  /** Managed handoff files left by an earlier run describe engines that no longer exist. */
  #removeStaleManagedHandoffs(): void {
    let names: string[];
    try {
      names = readdirSync(this.#o.runtime.engines).filter((n) => n.endsWith('.json'));
    } catch {
      return;
    }
    for (const name of names) {
      const path = join(this.#o.runtime.engines, name);
      try {
        const h = HandoffFileSchema.parse(JSON.parse(readFileSync(path, 'utf8')));
        if (h.provisioning_mode === 'managed') {
          rmSync(path, { force: true });
          this.#log.info({ path, pid: h.pid }, 'removed managed handoff file of a previous run');
        }
      } catch {
        // Not ours to judge here: the watcher rejects it with a reason.
      }
    }
  }

  async #onHandoff(path: string, h: HandoffFile): Promise<void> {
    const controller = this.#controllers.get(h.pool_id);
    if (h.provisioning_mode === 'managed') {
      if (controller?.ownsHandoff(h) === true) {
        this.registry.touch(h.pool_id);
        return;
      }
      throw new HandoffError(`managed handoff for pool ${h.pool_id} pid ${h.pid}, which this daemon does not run`, { poolId: h.pool_id, pid: h.pid });
    }
    if (controller !== undefined) {
      await controller.adopt(path, h);
      this.#log.info({ poolId: h.pool_id, url: h.url, human: `adopted external engine ${h.url} into configured pool ${h.pool_id}` }, 'external engine adopted');
      return;
    }
    await this.#adopt(path, h);
  }

  /** An external engine for a pool id this node does not configure: a pool of its own. */
  async #adopt(path: string, h: HandoffFile): Promise<void> {
    const client = await this.engineClient(h.url);
    const binding = await probeExternalEngine(client, h, {
      timeoutMs: this.#o.adoptTimeoutMs ?? 30_000,
      onHealth: (r) => this.metrics.healthChecks.inc({ pool_id: h.pool_id, result: r }),
    });
    const r = this.registry;
    r.register(h.pool_id, { managed: false, models: [h.model.id], deterministic: false, ctx: binding.ctx, slotsTotal: binding.slots_total, state: 'stopped', reason: 'adopting' });
    this.#adopted.get(h.pool_id)?.monitor.close();
    r.bindEngine(h.pool_id, binding);
    r.setModels(h.pool_id, [h.model.id]);
    r.setLastError(h.pool_id, undefined);
    r.transition(h.pool_id, 'ready', `adopted external engine ${h.url}`);
    const monitor = new EngineMonitor({
      client,
      logger: this.#log.child({ poolId: h.pool_id }),
      ...(this.#o.externalProbeMs !== undefined ? { intervalMs: this.#o.externalProbeMs } : {}),
      onHealth: (res) => this.metrics.healthChecks.inc({ pool_id: h.pool_id, result: res }),
      onDown: (why) => {
        r.unbindEngine(h.pool_id);
        r.setLastError(h.pool_id, why);
        r.transition(h.pool_id, 'failed', why);
      },
      onUp: () => {
        r.bindEngine(h.pool_id, binding);
        r.setLastError(h.pool_id, undefined);
        r.transition(h.pool_id, 'ready', 'external engine healthy again');
      },
    });
    this.#adopted.set(h.pool_id, { monitor, path, handoff: h });
    this.#log.info({ poolId: h.pool_id, url: h.url, slots: binding.slots_total, human: `adopted external engine ${h.url} as pool ${h.pool_id}` }, 'external engine adopted');
  }

  async #onHandoffRemoved(path: string): Promise<void> {
    for (const [poolId, a] of this.#adopted) {
      if (a.path !== path) continue;
      a.monitor.close();
      this.#adopted.delete(poolId);
      this.registry.unbindEngine(poolId);
      this.registry.transition(poolId, 'stopped', 'external handoff file removed');
      this.#log.info({ poolId, path }, 'external engine released: handoff file removed');
      return;
    }
    for (const c of this.#controllers.values()) await c.handoffRemoved(path);
  }

  /**
   * Drain (DESIGN §5): no new leases, in-flight work until `deadlineMs`, then stop. Configured pools
   * stop their engine; an adopted external engine is released (not killed: it is not ours).
   * Throws synchronously for unknown or busy pools; the returned promise is the whole operation.
   */
  drain(poolId: string, deadlineMs: number): Promise<void> {
    const c = this.#controllers.get(poolId);
    if (c !== undefined) return c.drain(deadlineMs);
    const a = this.#adopted.get(poolId);
    if (a === undefined) throw new PoolNotFoundError(poolId);
    const r = this.registry;
    if (r.state(poolId) === 'draining') throw new PoolBusyError(poolId, 'drain');
    if (r.state(poolId) === 'ready') r.transition(poolId, 'draining', `draining; deadline ${deadlineMs} ms`);
    return (async () => {
      const until = Date.now() + deadlineMs;
      while (r.activeLeases(poolId) > 0 && Date.now() < until) await new Promise((res) => setTimeout(res, 20).unref());
      if (r.activeLeases(poolId) > 0) r.abortLeases(poolId, 'drain deadline passed');
      a.monitor.close();
      this.#adopted.delete(poolId);
      r.unbindEngine(poolId);
      r.transition(poolId, 'stopped', 'drained (external engine released, not stopped)');
    })();
  }

  /** Reload with rollback; only configured pools can load another model. */
  reload(poolId: string, ref: string, sha256: string | undefined, deadlineMs: number): Promise<void> {
    const c = this.#controllers.get(poolId);
    if (c !== undefined) return c.reload(ref, sha256, deadlineMs);
    if (!this.registry.has(poolId)) throw new PoolNotFoundError(poolId);
    throw new PoolNotManagedError(poolId);
  }

  /** Stops the watcher, every pool (engines SIGTERM → SIGKILL) and the HTTP clients. Idempotent. */
  close(): Promise<void> {
    this.#closing ??= (async () => {
      this.#state = 'closing';
      await this.#watcher.close();
      for (const a of this.#adopted.values()) a.monitor.close();
      await Promise.all([...this.#controllers.values()].map((c) => c.close()));
      await Promise.all([...this.#clients.values()].map((c) => c.close()));
      const clients = await this.#engineClients?.catch(() => undefined);
      await clients?.close();
      this.#state = 'closed';
    })();
    return this.#closing;
  }
}
