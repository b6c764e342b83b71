import type { Http2Server } from 'node:http2';
import Fastify, {
  LogController,
  type FastifyBaseLogger,
  type FastifyError,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
  type RouteGenericInterface,
} from 'fastify';
import { serializerCompiler, validatorCompiler, type ZodTypeProvider } from 'fastify-type-provider-zod';
import type { Logger } from 'pino';
import type { PoolManagerConfig } from '@llama-orch/contracts';
import {
  bearerAuthPlugin,
  correlationIdFor,
  correlationPlugin,
  lazyChildLoggerFactory,
  sha256,
} from '@llama-orch/daemon-support';
import { disabledTracing, type Tracing } from '@llama-orch/daemon-support/tracing';
import { completionsRoute } from './http/completions-route.js';
import { dispatchesRoute } from './http/dispatches-route.js';
import { errorHandlerPlugin, sendError } from './http/error-handler.js';
import { metricsRoute } from './http/metrics-route.js';
import { poolRoutes } from './http/pool-routes.js';
import { OPENAPI_PATH, openApiRoute } from './http/openapi-route.js';
import { PROBE_PATHS, probeRoutes } from './http/probe-routes.js';
import type { PoolManager } from './pools/pool-manager.js';
import { UnauthorizedError } from './errors.js';

export interface AppDeps {
  manager: PoolManager;
  logger: Logger;
  /** Bearer token (config `api_token` or env, resolved by main); undefined = no auth (loopback only). */
  apiToken: string | undefined;
  /** The daemon's tracing (main starts it from the OTEL_* variables): dispatches are spans. @default off */
  tracing?: Tracing;
}

/**
 * pool-managerd's HTTP API (spec 50, HTTP). Never listens, reads env or installs
 * signal handlers: main.ts does.
 */
export async function buildApp(deps: AppDeps, config: Pick<PoolManagerConfig, 'node'>) {
  const base = Fastify({
    ...fastifyOptions(deps, config),
    frameworkErrors: (err: FastifyError, _request: FastifyRequest, reply: FastifyReply) => {
      sendError(reply, 'INVALID_PARAMS', malformedPath(err));
    },
  });
  await registerCommon(base, deps);
  const app = base.withTypeProvider<ZodTypeProvider>();
  await app.register(metricsRoute, { registry: deps.manager.metrics.registry });
  await app.register(probeRoutes, { manager: deps.manager });
  await app.register(openApiRoute);
  await app.register(poolRoutes, { manager: deps.manager });
  await app.register(completionsRoute, { manager: deps.manager, tracing: deps.tracing ?? disabledTracing() });
  await app.register(dispatchesRoute, { manager: deps.manager });
  return app;
}

/**
 * The dispatch routes alone (completions, re-attach and cancel) over cleartext HTTP/2 (h2c, prior knowledge), for orchestratord: one
 * connection carries all of its in-flight tasks on this node, where HTTP/1.1 needs a socket per
 * task. Same auth, errors and correlation ids as {@link buildApp}; registered as `dispatch_h2c`.
 */
export async function buildDispatchApp(deps: AppDeps, config: Pick<PoolManagerConfig, 'node'>) {
  const h2 = Fastify({
    ...fastifyOptions(deps, config),
    http2: true,
    frameworkErrors: (
      err: FastifyError,
      _request: FastifyRequest<RouteGenericInterface, Http2Server>,
      reply: FastifyReply<RouteGenericInterface, Http2Server>,
    ) => {
      sendError(reply, 'INVALID_PARAMS', malformedPath(err));
    },
  });
  // Unavoidable: the hooks and routes are typed for HTTP/1.1 request objects; Fastify hands them the HTTP/2 compatibility objects, which have what they use.
  const app = (h2 as unknown as FastifyInstance).withTypeProvider<ZodTypeProvider>();
  await registerCommon(app, deps);
  await app.register(completionsRoute, { manager: deps.manager, tracing: deps.tracing ?? disabledTracing() });
  await app.register(dispatchesRoute, { manager: deps.manager });
  return h2;
}

/** What the two apps share; each adds its own `frameworkErrors` (typed for its own request objects). */
function fastifyOptions(deps: AppDeps, config: Pick<PoolManagerConfig, 'node'>) {
  const logger: FastifyBaseLogger = deps.logger.child({ component: 'http', node_id: config.node.id });
  return {
    loggerInstance: logger,
    requestIdHeader: false as const,
    // Access lines come from the onResponse hook below (debug; warn for 5xx).
    logController: new LogController({ requestIdLogLabel: 'correlation_id', disableRequestLogging: true }),
    genReqId: correlationIdFor,
    // A request's logger is its bindings until it writes a line (performance notes: lazy child loggers).
    childLoggerFactory: lazyChildLoggerFactory,
    bodyLimit: 4 * 1024 * 1024,
    // close() runs after the pools stopped (every dispatch stream has ended): remaining sockets
    // are only keep-alive or half-dead connections, and waiting for them can run a SIGTERM into
    // the 15 s grace kill (exit 1) after a chaos run.
    forceCloseConnections: true,
  };
}

/**
 * Router-level refusals (malformed percent-encoding, a path parameter over maxParamLength) bypass
 * hooks and the error handler; without `frameworkErrors` they leave as Fastify's own JSON with
 * status 400/414 and no correlation id instead of an ErrorEnvelope.
 */
function malformedPath(err: FastifyError): string {
  return `path: ${err.code === 'FST_ERR_MAX_PARAM_LENGTH' ? 'a path parameter is too long' : 'not a valid URL (bad percent-encoding)'}`;
}

async function registerCommon(app: FastifyInstance, deps: AppDeps): Promise<void> {
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);
  // First hook: every response, 401s and 404s included, carries the correlation id.
  await app.register(correlationPlugin);
  // Callback-style: no promise per request (performance notes: request hooks).
  app.addHook('onResponse', (request, reply, done) => {
    const level = reply.statusCode >= 500 ? 'warn' : 'debug';
    request.log[level](
      { method: request.method, url: request.url, status: reply.statusCode, ms: Math.round(reply.elapsedTime) },
      'request done',
    );
    done();
  });
  await app.register(errorHandlerPlugin);
  const open = new Set(['/metrics', ...PROBE_PATHS, OPENAPI_PATH]);
  await app.register(bearerAuthPlugin, {
    credentials: deps.apiToken === undefined ? [] : [{ digest: sha256(deps.apiToken) }],
    isOpen: (request) => open.has(request.routeOptions.url ?? ''),
    unauthorized: () => new UnauthorizedError(),
  });
}

export type PoolManagerApp = Awaited<ReturnType<typeof buildApp>>;
