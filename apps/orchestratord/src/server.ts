import type { OrchestratorConfig } from '@llama-orch/contracts';
import { closeAll, listenQuietly, type CloseReport } from '@llama-orch/daemon-support';
import type { Logger } from 'pino';
import { buildApp, type OrchdApp } from './app.js';
import { splitHostPort } from '@llama-orch/daemon-support';
import type { Credentials } from './http/credentials.js';
import { createUpstreamDispatchers, dispatchAcceptTimeoutMs } from './upstream/dispatchers.js';
import { storeSettingsOf } from './store/cluster-store.js';
import { createClusterStore } from './store/create-cluster-store.js';
import { redactedUrl } from './store/redacted-url.js';
import { systemClock } from '@llama-orch/daemon-support';
import type { Tracing } from '@llama-orch/daemon-support/tracing';

export interface StartOptions {
  config: Readonly<OrchestratorConfig>;
  /** Root logger of the process. */
  logger: Logger;
  /** Accepted credentials (`loadCredentials`). @default those of `config` without a keys file */
  credentials?: Credentials;
  /**
   * Runs once the app is built, before it listens (the catalog file's models): no request sees the
   * daemon without it. A rejection fails the start like a port in use.
   */
  beforeListen?: (app: OrchdApp) => Promise<void>;
  /** The process's tracing (main starts it): the app's spans, closed last. @default off */
  tracing?: Tracing;
}

export interface RunningServer {
  readonly app: OrchdApp;
  /** Base URL the server listens on (actual port when `addr` asked for port 0). */
  readonly url: string;
  /**
   * The graceful stop of a SIGTERM: drains (`app.drain` with the config's `drain_grace_ms` and
   * `drain_delay_ms`: not ready at once, requests still served, the tasks admitted here finish),
   * then {@link close}. Never rejects. Idempotent.
   */
  stop(): Promise<CloseReport>;
  /**
   * Closes the app at once (every task ends with its terminal frame, the listener stops) and then the
   * upstream connections: each step is attempted even when the one before failed, each bounded.
   * Never rejects; a non-empty `failed` means the process should exit non-zero. Idempotent.
   */
  close(): Promise<CloseReport>;
}

/** Longest the app's close may take: tasks end within ~2 s, then the listener waits for its connections. */
const APP_CLOSE_MS = 5000;
/** Longest the upstream agents wait for requests in flight before they are destroyed. */
const UPSTREAM_CLOSE_MS = 2000;
/** Longest the cluster store's connection takes to close. */
const STORE_CLOSE_MS = 2000;
/** Longest the last spans take to export on close (a collector that is down never holds a shutdown). */
const TRACING_CLOSE_MS = 2000;

/**
 * Builds and listens. Logs `{"msg":"listening","url":…}` once the port is bound: the e2e harness
 * starts orchestratord on port 0 and reads the actual URL from that line.
 */
export async function startServer(options: StartOptions): Promise<RunningServer> {
  // With ORCHD_REDIS_URL an unreachable Redis fails the start (StoreUnavailableError), before anything listens.
  const store = await createClusterStore(storeSettingsOf(options.config), {
    clock: systemClock,
    logger: options.logger.child({ component: 'cluster-store' }),
  });
  if (options.config.redis_url !== undefined) {
    options.logger.info(
      {
        redis: redactedUrl(options.config.redis_url),
        prefix: options.config.redis_prefix,
        replica: options.config.replica_id,
        shared: [
          'rate limits',
          'readiness',
          'node registry and liveness',
          'slot leases',
          'admission queue',
          'task records',
          'sessions',
          'replica membership',
          'dashboard activity',
        ],
        human:
          "Cluster store: Redis. Shared: per-key rate limits, /readyz, the node registry and liveness, slot leases, the admission queue, task records, sessions, replica membership and the dashboard's recent tasks and throughput; token frames stay with the replica that relays them",
      },
      'cluster store',
    );
  }
  const upstream = createUpstreamDispatchers({ connectTimeoutMs: dispatchAcceptTimeoutMs(options.config) });
  const app = await buildApp(
    {
      logger: options.logger,
      upstream: upstream.http1,
      upstreamH2c: upstream.h2c,
      store,
      ...(options.credentials !== undefined ? { credentials: options.credentials } : {}),
      ...(options.tracing !== undefined ? { tracing: options.tracing } : {}),
    },
    options.config,
  );
  const { host, port } = splitHostPort(options.config.addr);
  try {
    await options.beforeListen?.(app);
    await listenQuietly(app, { host, port });
  } catch (err) {
    await closeAll(
      [
        { name: 'app', close: () => app.close(), timeoutMs: APP_CLOSE_MS },
        { name: 'upstream connections', close: () => upstream.close(UPSTREAM_CLOSE_MS) },
        { name: 'cluster store', close: () => store.close(), timeoutMs: STORE_CLOSE_MS },
        { name: 'tracing', close: () => tracingClose(options.tracing), timeoutMs: TRACING_CLOSE_MS },
      ],
      { log: options.logger },
    );
    throw err;
  }
  const address = app.server.address();
  const actualPort = address !== null && typeof address === 'object' ? address.port : port;
  const urlHost = host.includes(':') ? `[${host}]` : host;
  const url = `http://${urlHost}:${actualPort}`;
  options.logger.info({ url, addr: options.config.addr, auth: options.config.api_token !== undefined }, 'listening');
  let closing: Promise<CloseReport> | undefined;
  let stopping: Promise<CloseReport> | undefined;
  const drainOptions = { graceMs: options.config.drain_grace_ms, delayMs: options.config.drain_delay_ms };
  const running: RunningServer = {
    app,
    url,
    stop: () => {
      // drain() never rejects (a poll and a timer); the close runs after it either way
      stopping ??= app.drain(drainOptions).then(
        () => running.close(),
        () => running.close(),
      );
      return stopping;
    },
    close: () => {
      closing ??= closeAll(
        [
          { name: 'app', close: () => app.close(), timeoutMs: APP_CLOSE_MS },
          {
            name: 'upstream connections',
            close: () => upstream.close(UPSTREAM_CLOSE_MS),
            timeoutMs: UPSTREAM_CLOSE_MS + 1000,
          },
          { name: 'cluster store', close: () => store.close(), timeoutMs: STORE_CLOSE_MS },
          { name: 'tracing', close: () => tracingClose(options.tracing), timeoutMs: TRACING_CLOSE_MS + 1000 },
        ],
        { log: options.logger },
      );
      return closing;
    },
  };
  return running;
}

/** The longest {@link RunningServer.stop} takes: the drain grace, then the close's steps (5 s + 3 s + 2 s). */
export function stopBudgetMs(config: Pick<OrchestratorConfig, 'drain_grace_ms'>): number {
  return config.drain_grace_ms + APP_CLOSE_MS + UPSTREAM_CLOSE_MS + 1000 + STORE_CLOSE_MS;
}

/** The last spans out (bounded by the tracing's own timeout), after everything that makes spans closed. */
function tracingClose(tracing: Tracing | undefined): Promise<void> {
  return tracing === undefined ? Promise.resolve() : tracing.close();
}
