import { join } from 'node:path';
import type { OrchestratorConfig } from '@llama-orch/contracts';
import Fastify, { type FastifyBaseLogger, type FastifyInstance, type FastifyRequest } from 'fastify';
import { serializerCompiler, validatorCompiler } from 'fastify-type-provider-zod';
import type { Logger } from 'pino';
import { Registry } from 'prom-client';
import type { Dispatcher } from 'undici';
import { AccessLogController } from './access-log.js';
import { CatalogStore } from './catalog-store.js';
import { InvalidParamsError } from './errors.js';
import { systemClock, type Clock } from './clock.js';
import { splitHostPort } from './config.js';
import { TaskDispatcher } from './dispatcher.js';
import { createMetrics } from './metrics.js';
import { NodeRegistry } from './node-registry.js';
import { lazyChildLoggerFactory } from './lazy-logger.js';
import { isPlaceable } from './placement.js';
import { PoolClient } from './pool-client.js';
import { SessionStore } from './session-store.js';
import type { AppServices } from './services.js';
import { admissionRoutes } from './plugins/admission.js';
import { authPlugin } from './plugins/auth.js';
import { catalogRoutes } from './plugins/catalog.js';
import { controlRoutes } from './plugins/control.js';
import { correlationIdFor, correlationPlugin } from './plugins/correlation.js';
import { errorsPlugin, sendError } from './plugins/errors.js';
import { metricsRoutes } from './plugins/metrics.js';
import { nodesRoutes } from './plugins/nodes.js';
import { sessionRoutes } from './plugins/sessions.js';
import { streamRoutes } from './plugins/streams.js';

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
}

/** Internal timings, for tests. */
export interface AppTuning {
  /** Dispatcher housekeeping period, ms. @default 100 */
  tickMs?: number;
  /** Period of queue `metrics` frames, ms. @default 1000 */
  metricsIntervalMs?: number;
}

export type OrchdApp = FastifyInstance & { readonly services: AppServices };

/** Paths that must never reach log lines. */
export const REDACT_PATHS = ['req.headers.authorization', 'headers.authorization', 'authorization', 'api_token', 'token', 'prompt'];

/**
 * Builds orchestratord: plugins, routes and the long-lived objects (registry, queue/dispatcher,
 * sessions), whose `close()` is wired to Fastify's close. Never listens, never reads the
 * environment, installs no signal handlers.
 */
export async function buildApp(deps: AppDeps, config: Readonly<OrchestratorConfig>, tuning: AppTuning = {}): Promise<OrchdApp> {
  const clock = deps.clock ?? systemClock;
  const logger = deps.logger.child({ component: 'orchestratord' }, { redact: { paths: REDACT_PATHS, censor: '[redacted]' } });
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
      sendError(reply, new InvalidParamsError(`path: ${err.code === 'FST_ERR_MAX_PARAM_LENGTH' ? 'a path parameter is longer than 1024 characters' : 'not a valid URL (bad percent-encoding)'}`));
    },
  });
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);

  const metricsRegistry = deps.metricsRegistry ?? new Registry();
  const registry = new NodeRegistry({ heartbeatIntervalMs: config.heartbeat_interval_ms, clock, logger: logger.child({ subsystem: 'registry' }) });
  const sessions = new SessionStore({
    ttlMs: config.session_ttl_ms, maxSessions: config.session_max, tokenBudget: config.session_token_budget, clock,
    onEvict: () => metrics.sessionsEvicted.inc(),
  });
  const poolClient = new PoolClient({
    dispatcher: deps.upstream, h2cDispatcher: deps.upstreamH2c, token: config.api_token,
    acceptTimeoutMs: config.dispatch_accept_timeout_ms ?? Math.max(config.heartbeat_interval_ms, 1000),
    http1PerNode: config.dispatch_http1_per_node,
  });
  let dispatcherRef: TaskDispatcher | undefined;
  const metrics = createMetrics(metricsRegistry, {
    queueDepth: () => dispatcherRef?.queueDepth() ?? { interactive: 0, batch: 0 },
    nodesOnline: () => registry.list().filter((n) => n.state === 'online').length,
    pools: () => registry.pools().map((p) => ({ pool_id: p.pool_id, node_id: p.node_id, leased: p.leased, free: p.free, placeable: isPlaceable(p) })),
  });
  const dispatcher = new TaskDispatcher({
    registry,
    poolClient,
    metrics,
    sessions,
    clock,
    logger: logger.child({ subsystem: 'dispatcher' }),
    admissionCapacity: config.admission_capacity,
    admissionPolicy: config.admission_policy,
    placementStrategy: config.placement_strategy,
    ctxMax: config.ctx_max,
    streamGraceMs: config.stream_grace_ms,
    streamGraceMaxTasks: config.stream_grace_max_tasks,
    ...(tuning.tickMs !== undefined ? { tickMs: tuning.tickMs } : {}),
    ...(tuning.metricsIntervalMs !== undefined ? { metricsIntervalMs: tuning.metricsIntervalMs } : {}),
  });
  dispatcherRef = dispatcher;

  const configured = config.public_url?.replace(/\/+$/, '');
  const { host: bindHost } = splitHostPort(config.addr);
  const wildcard = bindHost === '0.0.0.0' || bindHost === '::' || bindHost === '';
  // The bound port is fixed once listening; asking the socket per admission was measurable.
  let boundBase: string | undefined;
  const publicBase = (req: FastifyRequest): string => {
    if (configured !== undefined) return configured;
    if (boundBase !== undefined) return boundBase;
    const address = app.server.address();
    if (address !== null && typeof address === 'object') {
      if (wildcard) return `http://${req.host}`;
      const host = bindHost.includes(':') ? `[${bindHost}]` : bindHost;
      boundBase = `http://${host}:${address.port}`;
      return boundBase;
    }
    return `http://${config.addr}`;
  };

  const services: AppServices = {
    config, registry, dispatcher, sessions, poolClient, metrics, metricsRegistry, clock, publicBase,
    catalog: await CatalogStore.open({
      file: config.state_dir !== undefined ? join(config.state_dir, 'catalog-interest.json') : undefined,
      logger: logger.child({ subsystem: 'catalog' }),
    }),
  };
  app.decorate('services', services);

  // preClose runs before the server stops accepting and waits for connections: ending every task
  // here writes the terminal frames that let open SSE responses finish, so close() can complete.
  app.addHook('preClose', async () => {
    await dispatcher.close();
  });
  app.addHook('onClose', async () => {
    await Promise.all([registry.close(), sessions.close()]);
  });

  await app.register(correlationPlugin);
  await app.register(errorsPlugin);
  await app.register(authPlugin, { token: config.api_token });
  await app.register(metricsRoutes, { services });
  await app.register(nodesRoutes, { services });
  await app.register(admissionRoutes, { services });
  await app.register(streamRoutes, { services });
  await app.register(controlRoutes, { services });
  await app.register(catalogRoutes, { services });
  await app.register(sessionRoutes, { services });
  return app as unknown as OrchdApp;
}
