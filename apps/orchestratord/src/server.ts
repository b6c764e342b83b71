import type { OrchestratorConfig } from '@llama-orch/contracts';
import type { Logger } from 'pino';
import { buildApp, type OrchdApp } from './app.js';
import { splitHostPort } from './config.js';
import { createUpstreamDispatchers } from './upstream.js';

export interface StartOptions {
  config: Readonly<OrchestratorConfig>;
  /** Root logger of the process. */
  logger: Logger;
}

export interface RunningServer {
  readonly app: OrchdApp;
  /** Base URL the server listens on (actual port when `addr` asked for port 0). */
  readonly url: string;
  /** Closes the app (tasks end with terminal frames) and the upstream agent. Idempotent. */
  close(): Promise<void>;
}

/**
 * Builds and listens. Logs `{"msg":"listening","url":…}` once the port is bound: the e2e harness
 * starts orchestratord on port 0 and reads the actual URL from that line.
 */
export async function startServer(options: StartOptions): Promise<RunningServer> {
  const upstream = createUpstreamDispatchers();
  const app = await buildApp({ logger: options.logger, upstream: upstream.http1, upstreamH2c: upstream.h2c }, options.config);
  const { host, port } = splitHostPort(options.config.addr);
  try {
    await app.listen({ host, port, listenTextResolver: (address) => `fastify listening at ${address}` });
  } catch (err) {
    await app.close().catch(() => undefined);
    await upstream.close();
    throw err;
  }
  const address = app.server.address();
  const actualPort = address !== null && typeof address === 'object' ? address.port : port;
  const urlHost = host.includes(':') ? `[${host}]` : host;
  const url = `http://${urlHost}:${actualPort}`;
  options.logger.info({ url, addr: options.config.addr, auth: options.config.api_token !== undefined }, 'listening');
  let closing: Promise<void> | undefined;
  return {
    app,
    url,
    close: () => {
      closing ??= (async () => {
        await app.close();
        await upstream.close();
      })();
      return closing;
    },
  };
}
