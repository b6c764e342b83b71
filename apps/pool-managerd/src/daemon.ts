import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import closeWithGrace from 'close-with-grace';
import { pino, type Logger } from 'pino';
import { EngineProvisioner, scrubEngineEnv } from '@llama-orch/engine-provisioner';
import { ModelProvisioner } from '@llama-orch/model-provisioner';
import type { PoolManagerApp } from './app.js';
import type { BundleUnusable, CodeCacheState } from './bundle-loader.js';
import { loadSettings, splitHostPort } from './config.js';
import type { GpuMemoryMonitor } from './gpu-memory.js';
import type { NodeClient } from './node-client.js';
import { PoolManager } from './pool-manager.js';
import { supervisionSettings } from './supervision-config.js';
import { claimRuntimeDir, runtimeDir } from './runtime-dir.js';
import { detectPdeathsigWrapper } from './setpriv.js';

/** Longest wait for the engines to spawn before the HTTP API is loaded anyway, ms. */
const LOAD_API_AFTER_MS = 300;

/** How main.ts loaded the daemon's code (logged with `listening`: start-up time depends on it). */
export interface StartupInfo {
  /** `bundle`: the esbuild bundle (one file, `bundle/`); `modules`: the tsc output, module by module. */
  code: 'bundle' | 'modules';
  /** V8 code cache of the bundle: `hit` used, `miss` none yet, `rejected` refused by V8; `off` for modules. */
  codeCache: CodeCacheState | 'off';
  /** Why the bundle was not used (`code: 'modules'`). */
  bundleUnusable?: BundleUnusable;
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

async function main(logger: Logger, env: NodeJS.ProcessEnv, startup: StartupInfo): Promise<void> {
  const settings = await loadSettings(process.argv.slice(2), env);
  const { config } = settings;
  const log = logger.child({ nodeId: config.node.id });
  const runtime = runtimeDir(settings.runtimeDir);
  const releaseRuntime = claimRuntimeDir(runtime);
  // Verified while the pools provision; every spawn waits for the answer.
  const wrapper = detectPdeathsigWrapper().then((w) => {
    if (w === undefined) log.warn('setpriv --pdeathsig is unavailable: engines may outlive a killed pool-managerd until its next start sweeps them');
    return w ?? [];
  });

  const engines = new EngineProvisioner({ cacheDir: settings.cacheDir, logger: log, env });
  let manager: PoolManager | undefined;
  const models = new ModelProvisioner({
    cacheDir: settings.cacheDir,
    logger: log,
    baseDir: settings.configDir,
    progressTty: false,
    ...(env.HF_TOKEN !== undefined && env.HF_TOKEN !== '' ? { hfToken: env.HF_TOKEN } : {}),
    ...(config.model_cache_budget_bytes !== undefined ? { budgetBytes: config.model_cache_budget_bytes } : {}),
    isPinned: (id) => manager?.modelInUse(id) ?? false,
  });
  // Engines spawn before the HTTP stack is even loaded: their start (model load) overlaps ours.
  // Pools are reported ready only once the API listens (`serving`).
  let markServing!: () => void;
  const serving = new Promise<void>((resolve) => {
    markServing = resolve;
  });
  manager = new PoolManager({
    nodeId: config.node.id,
    pools: config.pools,
    runtime,
    logger: log,
    engines,
    models,
    engineEnv: scrubEngineEnv(env),
    wrapper,
    supervision: supervisionSettings(config.supervision),
    serving,
  });

  let app: PoolManagerApp | undefined;
  let dispatchApp: { close(): Promise<unknown> } | undefined;
  let nodeClient: NodeClient | undefined;
  let gpuMemory: GpuMemoryMonitor | undefined;
  const closer = closeWithGrace({ delay: 15_000, logger: log }, async ({ signal, err }) => {
    if (err !== undefined) log.error({ err }, 'shutting down after an error');
    else log.info({ signal }, 'shutting down');
    await nodeClient?.close();
    await gpuMemory?.close();
    await manager?.close();
    await app?.close();
    await dispatchApp?.close();
    await models.close();
    releaseRuntime();
    log.info('stopped');
  });
  void closer;

  const started = manager.start();
  // The HTTP stack (Fastify & co.) is loaded once the engines are spawning (warm cache: tens of ms),
  // so its loading overlaps their start instead of delaying it.
  await manager.enginesSpawned(LOAD_API_AFTER_MS);
  const { buildApp, buildDispatchApp } = await import('./app.js');
  app = await buildApp({ manager, logger: log, apiToken: settings.apiToken }, config);
  await app.listen({ host: settings.host, port: settings.port });
  const address = app.server.address();
  const port = typeof address === 'object' && address !== null ? address.port : settings.port;
  const hostForUrl = settings.host.includes(':') ? `[${settings.host}]` : settings.host;
  const url = `http://${hostForUrl}:${port}`;
  log.info({ url, runtimeDir: runtime.root, cacheDir: settings.cacheDir, pools: config.pools.map((p) => p.id), startup }, 'listening');

  // The dispatch route again over h2c: orchestratord multiplexes its tasks for this node there.
  // Listening before any pool is announced ready, like the API.
  let dispatchPort: number | undefined;
  const h2cAddr = config.node.dispatch_h2c_addr;
  if (h2cAddr !== 'off') {
    const { host: h2cHost, port: h2cPort } = h2cAddr === undefined ? { host: settings.host, port: 0 } : splitHostPort(h2cAddr);
    const h2 = await buildDispatchApp({ manager, logger: log, apiToken: settings.apiToken }, config);
    dispatchApp = h2;
    await h2.listen({ host: h2cHost, port: h2cPort });
    const a = h2.server.address();
    dispatchPort = typeof a === 'object' && a !== null ? a.port : h2cPort;
    log.info({ port: dispatchPort, host: h2cHost }, 'dispatch listening (h2c)');
  }
  markServing();

  await started;
  if (config.orchestrator !== undefined) {
    const [{ NodeClient }, { detectCapabilities, machineId }, { GpuMemoryMonitor, withVramFree }] = await Promise.all([
      import('./node-client.js'), import('./capabilities.js'), import('./gpu-memory.js'),
    ]);
    const capabilities = await detectCapabilities(log);
    // GPU hosts report each GPU pool's free device memory with its heartbeats (sampled once per interval).
    const monitor = capabilities.gpus.length > 0
      ? new GpuMemoryMonitor({ intervalMs: config.orchestrator.heartbeat_interval_ms, logger: log.child({ component: 'gpu-memory' }) })
      : undefined;
    gpuMemory = monitor;
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
        const snapshots = manager?.registry.snapshots() ?? [];
        return monitor === undefined ? snapshots : withVramFree(snapshots, config.pools, monitor);
      },
      logger: log.child({ component: 'node-client' }),
    });
    nodeClient = client;
    // State changes reach orchestratord at once; slot counts ride on the periodic heartbeat.
    manager.registry.onChange((_poolId, change) => {
      if (change !== undefined) client.nudge();
    });
    client.start();
  }
}

/**
 * The daemon: `pool-managerd --config <file>` (argv and env of this process). Called by main.ts,
 * which loads this module either from the bundle or as plain modules.
 */
export function runDaemon(startup: StartupInfo): void {
  const env = process.env;
  const logger = pino({
    name: 'pool-managerd',
    level: env.LOG_LEVEL ?? 'info',
    redact: ['req.headers.authorization', 'apiToken', 'api_token', '*.api_token'],
  });
  main(logger, env, startup).catch((err: unknown) => {
    logger.fatal({ err }, 'pool-managerd failed to start');
    process.exitCode = 1;
    // Engines spawned so far die with us (pdeathsig); give pino a tick to flush. Not unref'd: an
    // emptied event loop would run close-with-grace's beforeExit path, which exits 0.
    setTimeout(() => process.exit(1), 100);
  });
}
