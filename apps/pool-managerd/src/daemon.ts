import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import type { Logger } from 'pino';
import {
  closeAll,
  installGracefulExit,
  listenQuietly,
  splitHostPort,
  type CloseStep,
} from '@llama-orch/daemon-support';
import { startTracing, type Tracing } from '@llama-orch/daemon-support/tracing';
import { EngineProvisioner, scrubEngineEnv } from '@llama-orch/engine-provisioner';
import { ModelProvisioner } from '@llama-orch/model-provisioner';
import type { PoolManagerApp } from './app.js';
import { loadSettings } from './config.js';
import type { GpuMemoryMonitor } from './node/gpu-memory.js';
import type { NodeClient } from './node/node-client.js';
import { PoolManager } from './pools/pool-manager.js';
import { ENGINE_SCRAPE_FLOOR_MS } from './pools/pool-manager-options.js';
import { DEFAULT_SUPERVISION, supervisionSettings } from './supervision/settings.js';
import type { BundleUnusable, CodeCacheState } from './support/bundle-loader.js';
import { createRootLogger } from './support/logging.js';
import { claimRuntimeDir, runtimeDir } from './support/runtime-dir.js';
import { detectPdeathsigWrapper } from './support/setpriv.js';

/** Longest wait for the engines to spawn before the HTTP API is loaded anyway, ms. */
const LOAD_API_AFTER_MS = 300;

/** SIGTERM → exit budget; a second Ctrl-C exits at once (installGracefulExit), ms. */
const SHUTDOWN_GRACE_MS = 15_000;

/** Longest wait for the last spans at shutdown (a collector that is down never holds the exit), ms. */
const TRACING_CLOSE_MS = 2000;

/** How main.ts loaded the daemon's code (logged with `listening`: start-up time depends on it). */
export interface StartupInfo {
  /** `bundle`: the esbuild bundle (one file, `bundle/`); `modules`: the tsc output, module by module. */
  code: 'bundle' | 'modules';
  /** V8 code cache of the bundle: `hit` used, `miss` none yet, `rejected` refused by V8; `off` for modules. */
  code_cache: CodeCacheState | 'off';
  /** Why the bundle was not used (`code: 'modules'`). */
  bundle_unusable?: BundleUnusable;
}

/** `url` with another port: the h2c listener is reached at the same host as the API. */
function withPort(url: string, port: number): string {
  const u = new URL(url);
  u.port = String(port);
  u.pathname = '/';
  return u.origin;
}

function version(): string {
  try {
    const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version?: unknown };
    return typeof pkg.version === 'string' ? pkg.version : '0.0.0';
  } catch {
    return '0.0.0';
  }
}

/** What the shutdown closes; filled in as the daemon starts (the handler is installed first). */
interface Running {
  nodeClient?: NodeClient;
  gpuMemory?: GpuMemoryMonitor;
  manager?: PoolManager;
  app?: PoolManagerApp;
  dispatchApp?: { close(): Promise<unknown> };
  models?: ModelProvisioner;
  tracing?: Tracing;
  releaseRuntime?: () => void;
  /** The engines' SIGTERM grace (supervision `stop_timeout_ms`), ms. */
  stopTimeoutMs: number;
  /** Set when the shutdown began: the start-up stops where it is (nothing new is opened). */
  closing?: boolean;
}

/** Read afresh after each await of the start-up: a signal may arrive at any of them. */
function stopping(r: Running): boolean {
  return r.closing === true;
}

/**
 * The shutdown sequence: every step runs, in order, each bounded, whatever the earlier ones did
 * (closeAll). Resolves true when every step succeeded.
 */
async function shutdown(log: Logger, r: Running): Promise<boolean> {
  r.closing = true;
  const step = (name: string, close: (() => unknown) | undefined, timeoutMs?: number): CloseStep | undefined =>
    close === undefined ? undefined : { name, close, ...(timeoutMs !== undefined ? { timeoutMs } : {}) };
  const report = await closeAll(
    [
      // Deregistration first: orchestratord stops placing here while the engines still run.
      step('node client', r.nodeClient && (() => r.nodeClient?.close())),
      step('gpu memory monitor', r.gpuMemory && (() => r.gpuMemory?.close())),
      // Engines get their SIGTERM grace, then SIGKILL; the pools stop concurrently.
      step('pool manager', r.manager && (() => r.manager?.close()), r.stopTimeoutMs + 7000),
      step('http api', r.app && (() => r.app?.close())),
      step('h2c dispatch listener', r.dispatchApp && (() => r.dispatchApp?.close())),
      step('model provisioner', r.models && (() => r.models?.close())),
      // After the listeners: the last dispatches' spans have ended and are flushed with the rest.
      step('tracing', r.tracing && (() => r.tracing?.close()), TRACING_CLOSE_MS + 1000),
      step('runtime dir', r.releaseRuntime),
    ],
    { log },
  );
  return report.failed.length === 0;
}

async function main(logger: Logger, env: NodeJS.ProcessEnv, startup: StartupInfo, running: Running): Promise<void> {
  const settings = await loadSettings(process.argv.slice(2), env);
  const { config } = settings;
  const log = logger.child({ node_id: config.node.id });
  // Off (and nothing of the SDK loaded) unless an OTEL_* variable configures an OTLP endpoint;
  // settings it cannot honour (grpc …) stop the start here, before anything is spawned.
  const tracing = await startTracing({
    serviceName: 'pool-managerd',
    serviceVersion: version(),
    env,
    logger: log,
    closeTimeoutMs: TRACING_CLOSE_MS,
  });
  running.tracing = tracing;
  const supervision = supervisionSettings(config.supervision);
  running.stopTimeoutMs = supervision.stopTimeoutMs;
  const runtime = runtimeDir(settings.runtimeDir);
  running.releaseRuntime = claimRuntimeDir(runtime);
  // Installed before the first spawn: a signal at any point of the start-up stops what exists.
  installGracefulExit({
    graceMs: SHUTDOWN_GRACE_MS,
    log,
    shutdown: async ({ err }) => {
      if (err !== undefined) log.error({ err }, 'shutting down after an error');
      if (!(await shutdown(log, running))) {
        log.error('stopped; some shutdown steps failed');
        return false;
      }
      log.info('stopped');
      return true;
    },
  });
  // Verified while the pools provision; every spawn waits for the answer.
  const wrapper = detectPdeathsigWrapper().then((w) => {
    if (w === undefined)
      log.warn(
        'setpriv --pdeathsig is unavailable: engines may outlive a killed pool-managerd until its next start sweeps them',
      );
    return w ?? [];
  });

  // build progress is logged once, with the model's, by the provisioning step (provision.ts)
  const engines = new EngineProvisioner({ cacheDir: settings.cacheDir, logger: log, env, logProgress: false });
  const models = new ModelProvisioner({
    cacheDir: settings.cacheDir,
    logger: log,
    baseDir: settings.configDir,
    progressTty: false,
    ...(env.HF_TOKEN !== undefined && env.HF_TOKEN !== '' ? { hfToken: env.HF_TOKEN } : {}),
    ...(config.model_cache_budget_bytes !== undefined ? { budgetBytes: config.model_cache_budget_bytes } : {}),
    isPinned: (id) => running.manager?.modelInUse(id) ?? false,
  });
  running.models = models;
  // Engines spawn before the HTTP stack is even loaded: their start (model load) overlaps ours.
  // Pools are reported ready only once the API listens (`serving`).
  let markServing!: () => void;
  const serving = new Promise<void>((resolve) => {
    markServing = resolve;
  });
  const manager = new PoolManager({
    nodeId: config.node.id,
    pools: config.pools,
    runtime,
    logger: log,
    engines,
    models,
    engineEnv: scrubEngineEnv(env),
    wrapper,
    supervision,
    serving,
    onDemand: config.on_demand,
    // The engines' /metrics are read on the heartbeat tick (standalone: the heartbeat default), but
    // never more often than every ENGINE_SCRAPE_FLOOR_MS (see there).
    ...(config.orchestrator !== undefined
      ? { engineMetricsIntervalMs: Math.max(config.orchestrator.heartbeat_interval_ms, ENGINE_SCRAPE_FLOOR_MS) }
      : {}),
  });
  running.manager = manager;

  const started = manager.start();
  // The HTTP stack (Fastify & co.) is loaded once the engines are spawning (warm cache: tens of ms),
  // so its loading overlaps their start instead of delaying it.
  await manager.enginesSpawned(LOAD_API_AFTER_MS);
  const { buildApp, buildDispatchApp } = await import('./app.js');
  if (stopping(running)) return;
  const app = await buildApp({ manager, logger: log, apiToken: settings.apiToken, tracing }, config);
  running.app = app;
  await listenQuietly(app, { host: settings.host, port: settings.port });
  const address = app.server.address();
  const port = typeof address === 'object' && address !== null ? address.port : settings.port;
  const hostForUrl = settings.host.includes(':') ? `[${settings.host}]` : settings.host;
  const url = `http://${hostForUrl}:${port}`;
  log.info(
    {
      url,
      runtime_dir: runtime.root,
      cache_dir: settings.cacheDir,
      pools: config.pools.map((p) => p.id),
      ...(config.on_demand !== undefined ? { memory_budget_bytes: config.on_demand.memory_budget_bytes } : {}),
      startup,
    },
    'listening',
  );

  // The dispatch route again over h2c: orchestratord multiplexes its tasks for this node there.
  // Listening before any pool is announced ready, like the API.
  let dispatchPort: number | undefined;
  const h2cAddr = config.node.dispatch_h2c_addr;
  if (h2cAddr !== 'off' && !stopping(running)) {
    const { host: h2cHost, port: h2cPort } =
      h2cAddr === undefined ? { host: settings.host, port: 0 } : splitHostPort(h2cAddr);
    const h2 = await buildDispatchApp({ manager, logger: log, apiToken: settings.apiToken, tracing }, config);
    running.dispatchApp = h2;
    await listenQuietly(h2, { host: h2cHost, port: h2cPort });
    const a = h2.server.address();
    dispatchPort = typeof a === 'object' && a !== null ? a.port : h2cPort;
    log.info({ port: dispatchPort, host: h2cHost }, 'dispatch listening (h2c)');
  }
  markServing();

  await started;
  if (config.orchestrator === undefined || stopping(running)) return;
  const [{ NodeClient }, { detectCapabilities, machineId }, { GpuMemoryMonitor, withVramFree }] = await Promise.all([
    import('./node/node-client.js'),
    import('./node/capabilities.js'),
    import('./node/gpu-memory.js'),
  ]);
  const capabilities = await detectCapabilities(log);
  if (stopping(running)) return;
  // GPU hosts report each GPU pool's free device memory with its heartbeats (sampled once per interval).
  const monitor =
    capabilities.gpus.length > 0
      ? new GpuMemoryMonitor({
          intervalMs: config.orchestrator.heartbeat_interval_ms,
          logger: log.child({ component: 'gpu-memory' }),
        })
      : undefined;
  if (monitor !== undefined) running.gpuMemory = monitor;
  monitor?.start();
  const wildcard = settings.host === '0.0.0.0' || settings.host === '::';
  const advertised = config.node.public_url ?? (wildcard ? `http://${hostname()}:${port}` : url);
  const client = new NodeClient({
    orchestratorUrl: config.orchestrator.url,
    nodeId: config.node.id,
    machineId: machineId(),
    address: advertised,
    ...(dispatchPort !== undefined ? { dispatchH2c: withPort(advertised, dispatchPort) } : {}),
    version: version(),
    capabilities,
    ...(settings.apiToken !== undefined ? { apiToken: settings.apiToken } : {}),
    heartbeatIntervalMs: config.orchestrator.heartbeat_interval_ms,
    snapshots: () => {
      const snapshots = manager.pools.snapshots();
      return monitor === undefined ? snapshots : withVramFree(snapshots, manager.poolConfigs(), monitor);
    },
    memoryBudgetBytes: config.on_demand?.memory_budget_bytes,
    logger: log.child({ component: 'node-client' }),
  });
  running.nodeClient = client;
  // State changes, loads and unloads reach orchestratord at once; slot counts ride on the periodic heartbeat.
  manager.pools.onChange((_poolId, change) => {
    if (change !== undefined) client.nudge();
  });
  manager.pools.onMembership(() => client.nudge());
  // With loads on request, orchestratord evicts and unloads only idle copies, by `idle_since`: a copy
  // that just took a task (or just finished its last) says so at once, not a heartbeat later.
  if (config.on_demand !== undefined) manager.pools.onIdleChange(() => client.nudge());
  client.start();
}

/**
 * The daemon: `pool-managerd --config <file>` (argv and env of this process). Called by main.ts,
 * which loads this module either from the bundle or as plain modules.
 */
export function runDaemon(startup: StartupInfo): void {
  const env = process.env;
  const { logger, destination } = createRootLogger(env.LOG_LEVEL ?? 'info');
  // Buffered lines are written (bounded: a full or dead stdout cannot hold the exit) before the
  // process ends, on every path: the graceful exit, the failed start below.
  process.once('exit', () => destination.flushSync());
  const running: Running = { stopTimeoutMs: DEFAULT_SUPERVISION.stopTimeoutMs };
  main(logger, env, startup, running).catch(async (err: unknown) => {
    logger.fatal({ err }, 'pool-managerd failed to start');
    // What was started is stopped (engines included) before the exit, within the grace period. The
    // timer is not unref'd: an emptied event loop would run the graceful exit's beforeExit path,
    // which exits 0.
    const timer = setTimeout(() => process.exit(1), SHUTDOWN_GRACE_MS);
    await shutdown(logger, running);
    clearTimeout(timer);
    process.exit(1);
  });
}
