import { hostname } from 'node:os';
import type { OrchestratorConfig, Readiness } from '@llama-orch/contracts';
import { drainTasks, type DrainOptions, type DrainOutcome } from './tasks/task-drain.js';
import {
  closeAll,
  correlationIdFor,
  correlationPlugin,
  lazyChildLoggerFactory,
  systemClock,
  type Clock,
} from '@llama-orch/daemon-support';
import { dashboardAssetsDir } from '@llama-orch/dashboard';
import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import { serializerCompiler, validatorCompiler } from 'fastify-type-provider-zod';
import type { Logger } from 'pino';
import { disabledTracing, type Tracing } from '@llama-orch/daemon-support/tracing';
import { Registry } from 'prom-client';
import type { Dispatcher } from 'undici';
import type { Fleet } from './catalog/fleet.js';
import { endWaitersOfFailedLoads } from './catalog/load-failures.js';
import { IdleUnloads } from './catalog/idle-unloads.js';
import { ModelLoads } from './catalog/model-loads.js';
import { RoomWaits } from './catalog/room-waits.js';
import { DashboardFeed } from './dashboard/dashboard-feed.js';
import { loadCredentials, type Credentials } from './http/credentials.js';
import { InvalidParamsError } from './errors.js';
import { AccessLogController } from './http/access-log.js';
import { apiDocsPlugin, DOCS_PATHS, DOCS_PREFIX } from './http/api-docs.js';
import type { AppServices } from './http/app-services.js';
import { authPlugin } from './http/auth.js';
import { clientKeysPlugin } from './http/client-keys.js';
import type { ClusterStore } from './store/cluster-store.js';
import { openLocalStore } from './store/memory/memory-store.js';
import { StoreHealthWatch } from './store/store-health-watch.js';
import { corsOriginsPlugin } from './http/cors.js';
import { errorsPlugin, sendError } from './http/error-handler.js';
import { publicBaseResolver } from './http/public-base.js';
import { admissionRoutes } from './http/routes/admission.js';
import { catalogRoutes } from './http/routes/catalog.js';
import { controlRoutes } from './http/routes/control.js';
import { DASHBOARD_ASSETS_PREFIX, DASHBOARD_PAGE_PATHS, dashboardRoutes } from './http/routes/dashboard.js';
import { metricsRoutes } from './http/routes/metrics.js';
import { nodesRoutes } from './http/routes/nodes.js';
import { anthropicRoutes } from './http/routes/anthropic.js';
import { openAiRoutes } from './http/routes/openai.js';
import { responsesRoutes } from './http/routes/responses.js';
import { engineDoorRoutes } from './http/routes/engine-doors.js';
import { PROBE_PATHS, probeRoutes } from './http/routes/probes.js';
import { sessionRoutes } from './http/routes/sessions.js';
import { streamRoutes } from './http/routes/streams.js';
import { taskRoutes } from './http/routes/tasks.js';
import { requestTracingPlugin } from './http/request-tracing.js';
import { ClusterNodeSync } from './registry/cluster-node-sync.js';
import { ClusterSlotLeases } from './registry/cluster-slot-leases.js';
import { NodeRegistry } from './registry/node-registry.js';
import { candidateKey, isPlaceable } from './registry/pool-view.js';
import { RelayCounter } from './replicas/relay-counter.js';
import { ReplicaDirectory } from './replicas/replica-directory.js';
import { replicaIdentity } from './replicas/replica-identity.js';
import { ReplicaMembership } from './replicas/replica-membership.js';
import { SessionStore } from './sessions/session-store.js';
import { packageVersion } from './support/argv.js';
import { LeaseKeeper } from './support/lease-keeper.js';
import { createMetrics } from './support/metrics.js';
import { PrefixRouting } from './prefix/prefix-routing.js';
import { ClusterTasks } from './tasks/shared/cluster-tasks.js';
import { LocalCoordinator } from './tasks/local-coordinator.js';
import { SharedCoordinator } from './tasks/shared/shared-coordinator.js';
import { TaskOwnerProxy } from './http/task-owner-proxy.js';
import { TaskService } from './tasks/task-service.js';
import { TaskJournal } from './tasks/task-journal.js';
import { TaskRecords } from './tasks/task-records.js';
import { dispatchAcceptTimeoutMs } from './upstream/dispatchers.js';
import { PoolClient } from './upstream/pool-client.js';

/** What buildApp needs from its caller; nothing is created behind its back. */
export interface AppDeps {
  /** Root pino logger; the app logs through a child (`component: orchestratord`) with auth redaction. */
  logger: Logger;
  /** undici dispatcher for requests to pool-managerd nodes (owned and closed by the caller). */
  upstream: Dispatcher;
  /** Dispatcher for nodes that offer an h2c dispatch URL (owned and closed by the caller). @default upstream */
  upstreamH2c?: Dispatcher;
  /** Prometheus registry for this app. @default new Registry() */
  metricsRegistry?: Registry;
  /** @default system clock */
  clock?: Clock;
  /** Accepted credentials (main loads the keys file). @default those of `config` without a keys file */
  credentials?: Credentials;
  /** Folder of the built dashboard page. @default `dashboardAssetsDir()` of @llama-orch/dashboard */
  dashboardDir?: string;
  /** Version the dashboard shows. @default this package's version */
  version?: string;
  /**
   * The cluster store (server.ts builds it from `config` with createClusterStore and closes it).
   * Per-key rate limits, the replica list and the dashboard's activity go through any store; a
   * shared one (Redis) also holds the nodes, slot leases, queue, tasks and sessions, and the replica
   * runs the shared coordinator over them (.specs/65-cluster-store.md). The fleet catalog is the
   * store's too.
   * @default the in-process store, its catalog kept in `config.state_dir` when set (closed with the app)
   */
  store?: ClusterStore;
  /** This host's name: the default replica id (`<hostname>-<pid>`). @default os.hostname() */
  hostname?: string;
  /** @default process.pid */
  pid?: number;
  /** The process's tracing (main starts it from the OTEL_* variables; closed by the caller). @default off */
  tracing?: Tracing;
}

/** Internal timings, for tests. */
export interface AppTuning {
  /** Task housekeeping period, ms. @default 100 */
  tickMs?: number;
  /** Period of queue `metrics` frames, ms. @default 1000 */
  metricsIntervalMs?: number;
  /** Width of a dashboard throughput bucket, ms. @default 5000 */
  dashboardBucketMs?: number;
  /** Period of the sweep that unloads copies idle past their `idle_ttl_s`, ms. @default 1000 */
  idleUnloadSweepMs?: number;
  /** How long a model waits for room before a busy copy is swapped out for it, ms. @default 2000 */
  swapWaitMs?: number;
  /** Retry period of the loads of models waiting for room, ms. @default 500 */
  roomRetryMs?: number;
}

export type OrchdApp = FastifyInstance & {
  readonly services: AppServices;
  /**
   * The start of a graceful stop (tasks/task-drain.ts): not ready at once, requests still served, resolves
   * once the tasks admitted here have ended (or the grace passed). Call `close()` after. Idempotent.
   */
  readonly drain: (options: DrainOptions) => Promise<DrainOutcome>;
};

/** Paths that must never reach log lines. */
export const REDACT_PATHS = [
  'req.headers.authorization',
  'headers.authorization',
  'authorization',
  'api_token',
  'node_token',
  'token',
  'prompt',
];

/**
 * Builds orchestratord: plugins, routes and the long-lived objects (registry, task service,
 * sessions, catalog), whose `close()` is wired to Fastify's close. Never listens, never reads the
 * environment, installs no signal handlers.
 */
export async function buildApp(
  deps: AppDeps,
  config: Readonly<OrchestratorConfig>,
  tuning: AppTuning = {},
): Promise<OrchdApp> {
  const clock = deps.clock ?? systemClock;
  const logger = deps.logger.child(
    { component: 'orchestratord' },
    { redact: { paths: REDACT_PATHS, censor: '[redacted]' } },
  );
  const app = Fastify({
    loggerInstance: logger as FastifyBaseLogger,
    genReqId: correlationIdFor,
    requestIdHeader: false,
    logController: new AccessLogController({ requestIdLogLabel: 'correlation_id' }),
    childLoggerFactory: lazyChildLoggerFactory,
    bodyLimit: config.body_limit,
    routerOptions: { maxParamLength: 1024 },
    // Fastify's own closing answer is a bare 503 (no envelope, no correlation id, no Retry-After).
    // While closing, routes answer themselves: admission refuses with a retriable INTERNAL
    // envelope, and a stream request still gets its task's terminal frame.
    return503OnClosing: false,
    // Router-level refusals (malformed percent-encoding, a path parameter over maxParamLength)
    // bypass hooks and the error handler; without this they leave as Fastify's own JSON with
    // status 400/414 and no correlation id instead of an ErrorEnvelope.
    frameworkErrors: (err, _req, reply) => {
      sendError(
        reply,
        new InvalidParamsError(
          `path: ${err.code === 'FST_ERR_MAX_PARAM_LENGTH' ? 'a path parameter is longer than 1024 characters' : 'not a valid URL (bad percent-encoding)'}`,
        ),
      );
    },
  });
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);

  const metricsRegistry = deps.metricsRegistry ?? new Registry();
  const tracing = deps.tracing ?? disabledTracing('orchestratord');
  // A store the caller did not pass is the app's to close.
  const ownStore =
    deps.store === undefined
      ? await openLocalStore(
          { state_dir: config.state_dir, task_retention_count: config.task_retention_count },
          { clock, logger: logger.child({ subsystem: 'store' }) },
        )
      : undefined;
  const store = deps.store ?? (ownStore as ClusterStore);
  // The one decision on the store: a shared one (Redis) holds the cluster's state and the replica
  // runs the shared coordinator over it; the in-process one has no such parts.
  const shared = store.shared ? store : undefined;
  // In-process: the registry is the node store, on today's synchronous path. Shared: the store holds
  // the nodes and decides offline for the cluster; the registry is this replica's cache of them.
  const registry = new NodeRegistry({
    heartbeatIntervalMs: config.heartbeat_interval_ms,
    clock,
    logger: logger.child({ subsystem: 'registry' }),
    livenessFromStore: shared !== undefined,
  });
  const nodeSync = shared
    ? new ClusterNodeSync({ registry, store: shared.nodes, logger: logger.child({ subsystem: 'registry' }), clock })
    : undefined;
  // Redis: each dispatch also holds a cluster slot lease, so replicas never overfill a pool together.
  // A replica that dies is found within two heartbeat intervals: its slot leases lapse and its
  // tasks are taken over then (the leases are renewed every quarter to third of that), or at once
  // when a client resuming through another replica finds it gone (task-owner-proxy.ts). At least
  // 2 s: a live replica whose event loop stalls longer than three quarters of its lease loses its
  // tasks to another, and with sub-second heartbeats (tests) a loaded machine stalls that long.
  const replicaLeaseMs = Math.max(2000, 2 * config.heartbeat_interval_ms);
  // One loop renews every lease this replica holds (task owner leases and slot leases): a quarter lease.
  const leaseKeeper = shared ? new LeaseKeeper({ periodMs: replicaLeaseMs / 4 }) : undefined;
  const clusterLeases = shared
    ? new ClusterSlotLeases({
        keeper: leaseKeeper,
        store: shared.leases,
        ttlMs: replicaLeaseMs,
        logger: logger.child({ subsystem: 'registry' }),
        signals: shared.signals,
        foreign: (poolKey, n) => registry.setForeignLeases(poolKey, n),
      })
    : undefined;
  const poolClient = new PoolClient({
    dispatcher: deps.upstream,
    h2cDispatcher: deps.upstreamH2c,
    token: config.node_token ?? config.api_token,
    acceptTimeoutMs: dispatchAcceptTimeoutMs(config),
    http1PerNode: config.dispatch_http1_per_node,
  });
  // Replica identity and the live replicas (.specs/65-cluster-store.md, Replicas): the dashboard's
  // "replicas", the metrics leader, and the address of another replica.
  const identity = replicaIdentity({
    replicaId: config.replica_id,
    advertiseUrl: config.advertise_url,
    addr: config.addr,
    boundAddress: () => app.server.address(),
    hostname: deps.hostname ?? hostname(),
    pid: deps.pid ?? process.pid,
  });
  const replicaDirectory = new ReplicaDirectory({
    selfId: identity.replicaId,
    clock,
    maxAgeMs: 3 * config.heartbeat_interval_ms,
  });
  let tasksRef: TaskService | undefined;
  const metrics = createMetrics(metricsRegistry, {
    queueDepth: () => tasksRef?.queueDepth() ?? { interactive: 0, batch: 0 },
    nodesOnline: () => registry.list().filter((n) => n.state === 'online').length,
    pools: () =>
      registry.pools().map((p) => ({
        pool_id: p.pool_id,
        node_id: p.node_id,
        leased: p.leased,
        free: p.free,
        placeable: isPlaceable(p),
      })),
    // In-process there is no other replica; with Redis the lowest live id exports the cluster gauges.
    clusterLeader: () => shared === undefined || replicaDirectory.isLeader(),
  });
  const sessions = new SessionStore({
    ttlMs: config.session_ttl_ms,
    maxSessions: config.session_max,
    tokenBudget: config.session_token_budget,
    clock,
    onEvict: () => metrics.sessionsEvicted.inc(),
  });
  // With a shared store the replica that admits a task owns it; the cluster's queue orders them all.
  const cluster = shared
    ? new ClusterTasks({
        ...{
          queue: shared.queue,
          tasks: shared.tasks,
          lifecycle: shared.lifecycle,
          signals: shared.signals,
          replicaId: identity.replicaId,
        },
        address: () => identity.address(),
        logger: logger.child({ subsystem: 'tasks' }),
        retainMs: config.stream_grace_ms,
        changed: () => tasksRef?.pump(),
        ownerTtlMs: replicaLeaseMs,
        keeper: leaseKeeper,
        clock,
        slots: clusterLeases && {
          pools: () => registry.pools().map(candidateKey),
          holders: (p) => clusterLeases.holders(p),
          releaseTask: (p, t) => clusterLeases.releaseTask(p, t),
        },
      })
    : undefined;
  // Models on demand (.specs/67-models-on-demand.md): the catalog's loads, asked of the nodes with the
  // bearer token orchestratord uses for them. A claim outlives the heartbeats a new pool needs to be
  // listed everywhere, and is renewed while the pool prepares.
  const loadClaimTtlMs = Math.max(10_000, 3 * config.heartbeat_interval_ms);
  const fleet: Fleet = {
    nodes: () => registry.list(),
    pools: () => registry.pools(),
    markDraining: (nodeId, poolId) => registry.markDraining(nodeId, poolId),
    subscribe: (listener) => registry.subscribe(() => listener()),
  };
  // Late-bound: room waits need the loads, and an eviction tells room waits (a victim's queued tasks wait for it).
  let roomWaitsRef: RoomWaits | undefined;
  const models = new ModelLoads({
    evicted: (entry) => roomWaitsRef?.keepWaiting(entry),
    catalog: store.catalog,
    fleet,
    nodes: poolClient,
    replicaId: identity.replicaId,
    logger: logger.child({ subsystem: 'catalog' }),
    clock,
    claimTtlMs: loadClaimTtlMs,
  });

  const roomWaits = new RoomWaits({
    catalog: store.catalog,
    fleet,
    loads: models,
    queuedUntil: (ref) => tasksRef?.latestQueuedDeadline(ref),
    clock,
    logger: logger.child({ subsystem: 'catalog' }),
    ...(tuning.swapWaitMs !== undefined ? { swapWaitMs: tuning.swapWaitMs } : {}),
    ...(tuning.roomRetryMs !== undefined ? { retryMs: tuning.roomRetryMs } : {}),
  });
  roomWaitsRef = roomWaits;
  // cache-aware placement's prefix index (spec 68); no index, no cost, with the other strategies.
  const prefixes =
    config.placement_strategy === 'cache-aware'
      ? new PrefixRouting({ share: store.prefixes, replicaId: identity.replicaId, metrics, registry })
      : undefined;
  const tasks = new TaskService({
    registry,
    coordinator:
      cluster === undefined
        ? LocalCoordinator.factory({ sessions, admissionCapacity: config.admission_capacity })
        : SharedCoordinator.factory({ cluster, leases: clusterLeases, registry, poolClient, clock }),
    poolClient,
    metrics,
    clock,
    admissionCapacity: config.admission_capacity,
    admissionPolicy: config.admission_policy,
    placementStrategy: config.placement_strategy,
    prefixes,
    ctxMax: config.ctx_max,
    catalog: store.catalog,
    loads: { loader: models, waitMs: loadClaimTtlMs, room: roomWaits },
    tracer: tracing.enabled ? tracing.tracer : undefined,
    journal: new TaskJournal({
      store: store.taskRecords,
      owner: identity.replicaId,
      retainMs: config.task_retention_ms,
      log: logger.child({ subsystem: 'tasks' }),
    }),
    streamGraceMs: config.stream_grace_ms,
    streamGraceMaxTasks: config.stream_grace_max_tasks,
    tickMs: tuning.tickMs,
    metricsIntervalMs: tuning.metricsIntervalMs,
  });
  tasksRef = tasks;
  const stopEndingLoadWaiters = endWaitersOfFailedLoads(fleet, tasks);
  const idleUnloads = new IdleUnloads({
    catalog: store.catalog,
    fleet,
    loads: models,
    clock,
    logger: logger.child({ subsystem: 'catalog' }),
    leader: () => shared === undefined || replicaDirectory.isLeader(),
    everyMs: tuning.idleUnloadSweepMs ?? 1000,
    gone: (entry) => roomWaitsRef?.keepWaiting(entry),
  });
  idleUnloads.start();
  const version = deps.version ?? packageVersion();
  const relayCounter = new RelayCounter(tasks);
  const membership = new ReplicaMembership({
    store: store.replicas,
    identity,
    directory: replicaDirectory,
    version,
    figures: () => ({ tasksRelayed: relayCounter.tasksRelayed, load: relayCounter.load }),
    intervalMs: config.heartbeat_interval_ms,
    clock,
    logger: logger.child({ subsystem: 'replicas' }),
  });
  const dashboard = new DashboardFeed({
    registry,
    tasks,
    models,
    clock,
    version,
    activity: store.activity,
    replicaId: identity.replicaId,
    replicas: () => replicaDirectory.live(),
    logger: logger.child({ subsystem: 'dashboard' }),
    // Other replicas' tasks reach this one's pages only through the store: look again every second.
    ...(shared
      ? { pollMs: 1000, sharedQueue: { sizes: () => shared.queue.sizes(), capacity: config.admission_capacity } }
      : {}),
    ...(tuning.dashboardBucketMs !== undefined ? { bucketMs: tuning.dashboardBucketMs } : {}),
  });

  const services: AppServices = {
    config,
    registry,
    nodeSync,
    tasks,
    taskRecords: new TaskRecords({ store: store.taskRecords, live: (id) => tasks.get(id) }),
    owners:
      cluster &&
      new TaskOwnerProxy(
        cluster,
        deps.upstream,
        async (id) => (await store.replicas.list()).find((r) => r.replica_id === id)?.address,
      ),
    store,
    sessions,
    sessionReader: shared === undefined ? sessions : shared.sessions,
    catalog: store.catalog,
    models,
    poolClient,
    metrics,
    metricsRegistry,
    clock,
    dashboard,
    replicas: { identity, directory: replicaDirectory },
    publicBase: publicBaseResolver(app, config.addr, config.public_url),
  };

  const storeHealth = new StoreHealthWatch(store, logger.child({ subsystem: 'store' }));
  // Not ready from the first moment of the drain or close (before tasks end): load balancers stop sending.
  let closing = false;
  let draining: Promise<DrainOutcome> | undefined;
  const readiness = (): Readiness => {
    if (closing || draining !== undefined) return { status: 'not_ready', reason: 'shutting down' };
    if (!app.server.listening) return { status: 'not_ready', reason: 'not listening' };
    const storeProblem = storeHealth.problem;
    if (storeProblem !== undefined) return { status: 'not_ready', reason: storeProblem };
    return { status: 'ready' };
  };
  const drain = (o: DrainOptions): Promise<DrainOutcome> => {
    draining ??= drainTasks(tasks, o, logger);
    return draining;
  };
  // The app's own members, typed (Fastify's `decorate` would add them untyped): routes get the
  // services as plugin options; tests and main.ts reach them here.
  const orchd: OrchdApp = Object.assign(app, { services, drain });
  // preClose runs before the server stops accepting and waits for connections: ending every task
  // here writes the terminal frames that let open SSE responses finish, so close() can complete.
  app.addHook('preClose', async () => {
    closing = true;
    // Out of the replica list before the listener closes (Fastify may stop accepting before the
    // onClose hooks run): a listed replica whose address refuses connections is taken for dead,
    // and its tasks are taken over at once (http/task-owner-proxy.ts).
    await membership.close();
    await tasks.close();
    // The server's close waits for every connection. It closes the idle ones once, when it starts:
    // a kept-alive connection that was busy then (a node's heartbeat, another replica's read) would
    // stay for its keep-alive time, or for ever if its client goes on sending on it. So connections
    // are closed as they fall idle, and every answer from now on says `Connection: close`.
    const idle = setInterval(() => app.server.closeIdleConnections(), 100);
    idle.unref();
    app.server.once('close', () => clearInterval(idle));
  });
  app.addHook('onRequest', (_req, reply, done) => {
    if (closing) reply.raw.shouldKeepAlive = false;
    done();
  });
  // Each of these is closed even when another fails; any failure fails app.close().
  app.addHook('onClose', async () => {
    const report = await closeAll(
      [
        // Before the store closes (server.ts closes it after the app): leave (done in preClose), and write the last activity.
        { name: 'replica membership', close: () => membership.close() },
        { name: 'relay counter', close: () => Promise.resolve(relayCounter.close()) },
        { name: 'dashboard feed', close: () => dashboard.close() },
        { name: 'store health watch', close: () => storeHealth.close() },
        { name: 'cluster node sync', close: () => nodeSync?.close() ?? Promise.resolve() },
        { name: 'cluster slot leases', close: () => clusterLeases?.close() ?? Promise.resolve() },
        { name: 'lease renewals', close: () => leaseKeeper?.close() ?? Promise.resolve() },
        { name: 'prefix index', close: () => Promise.resolve(prefixes?.close()) },
        { name: 'node registry', close: () => registry.close() },
        { name: 'sessions', close: () => sessions.close() },
        {
          name: 'model loads',
          close: async () => {
            stopEndingLoadWaiters();
            await idleUnloads.close();
            await roomWaits.close();
            await models.close();
          },
        },
        // A store the app opened itself (server.ts closes the one it passes, after the app).
        { name: 'in-process store', close: () => ownStore?.close() ?? Promise.resolve() },
      ],
      { log: logger },
    );
    if (report.failed.length > 0)
      throw new AggregateError(
        report.failed.map((f) => f.err),
        `${report.failed.map((f) => f.name).join(', ')} failed to close`,
      );
  });

  await nodeSync?.start();
  await membership.start();
  // Announce the bound address as soon as there is one (the first announcement had the configured addr).
  app.addHook('onListen', () => membership.announceNow());
  await app.register(correlationPlugin);
  // Only with tracing on: off, no hook runs and no request gets a span.
  if (tracing.enabled) await app.register(requestTracingPlugin, { tracer: tracing.tracer });
  await app.register(errorsPlugin);
  // Before auth: preflights carry no token.
  await app.register(corsOriginsPlugin, { origins: config.cors_origins ?? [] });
  const credentials = deps.credentials ?? loadCredentials({ config: { ...config, keys_file: undefined }, env: {} });
  await app.register(authPlugin, {
    credentials,
    openPaths: ['/metrics', ...PROBE_PATHS, ...DOCS_PATHS, ...DASHBOARD_PAGE_PATHS],
    openPrefixes: [DOCS_PREFIX, DASHBOARD_ASSETS_PREFIX],
  });
  await app.register(clientKeysPlugin, {
    registry: metricsRegistry,
    rateLimited: credentials.keys.some((k) => k.rateLimit !== undefined),
    rateLimits: store.rateLimits,
  });
  await app.register(probeRoutes, { readiness });
  await app.register(metricsRoutes, { services });
  await app.register(apiDocsPlugin);
  await app.register(nodesRoutes, { services });
  await app.register(admissionRoutes, { services });
  await app.register(streamRoutes, { services });
  await app.register(taskRoutes, { services });
  await app.register(controlRoutes, { services });
  await app.register(catalogRoutes, { services });
  await app.register(sessionRoutes, { services });
  await app.register(openAiRoutes, { services });
  await app.register(anthropicRoutes, { services });
  await app.register(responsesRoutes, { services });
  await app.register(engineDoorRoutes, { services });
  await app.register(dashboardRoutes, { services, dir: deps.dashboardDir ?? dashboardAssetsDir() });
  return orchd;
}
