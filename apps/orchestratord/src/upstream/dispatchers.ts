import type { OrchestratorConfig } from '@llama-orch/contracts';
import { Agent, H2CClient } from 'undici';

/** Concurrent dispatches one HTTP/2 connection may carry (one node can run this many tasks). */
const H2C_STREAMS_PER_NODE = 65_535;

export interface UpstreamDispatchers {
  /** HTTP/1.1 to pool-managerd: drain/reload, and dispatches to nodes without an h2c URL. */
  readonly http1: Agent;
  /** h2c to pool-managerd's dispatch listener: every dispatch to a node over one connection. */
  readonly h2c: Agent;
  /**
   * Closes both agents: waits for requests in flight, at most `timeoutMs`, then destroys what is
   * left. Idempotent.
   */
  close(timeoutMs?: number): Promise<void>;
}

/** How long a node may take to answer a dispatch with its response headers, ms (`dispatch_accept_timeout_ms`). */
export function dispatchAcceptTimeoutMs(
  config: Pick<OrchestratorConfig, 'dispatch_accept_timeout_ms' | 'heartbeat_interval_ms'>,
): number {
  return config.dispatch_accept_timeout_ms ?? Math.max(config.heartbeat_interval_ms, 1000);
}

export interface UpstreamDispatchersOptions {
  /**
   * TCP connect timeout to a node, ms: give it the dispatch accept timeout. Aborting an undici
   * request does not end it while its connection is still being made (the request waits in the
   * client's queue until the connect settles), so without this a dispatch to a node whose link is
   * down took undici's 10 s connect timeout to fail, not the accept timeout (measured with the
   * partition tests: a task re-placed 10.2 s after its admission). @default 10000
   */
  connectTimeoutMs?: number;
}

/**
 * The dispatchers orchestratord reaches nodes with. With HTTP/1.1 every in-flight task holds a
 * socket to its node, so one process could relay at most half its open-file limit in streams;
 * over h2c a node costs one socket however many tasks it runs.
 */
export function createUpstreamDispatchers(options: UpstreamDispatchersOptions = {}): UpstreamDispatchers {
  const connect = { timeout: options.connectTimeoutMs ?? 10_000 };
  const http1 = new Agent({ connections: 256, keepAliveTimeout: 10_000, connect });
  const h2c = new Agent({
    keepAliveTimeout: 60_000,
    connect,
    factory: (origin, opts) =>
      new H2CClient(origin, { ...opts, maxConcurrentStreams: H2C_STREAMS_PER_NODE, pipelining: H2C_STREAMS_PER_NODE }),
  });
  let closing: Promise<void> | undefined;
  const close = async (timeoutMs: number): Promise<void> => {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<'late'>((resolve) => {
      timer = setTimeout(() => resolve('late'), timeoutMs);
      timer.unref();
    });
    const closed = Promise.all([http1.close(), h2c.close()]).then(() => 'closed' as const);
    closed.catch(() => undefined); // reported through the race below, or moot once destroyed
    const result = await Promise.race([closed, late]);
    clearTimeout(timer);
    if (result === 'late') await Promise.all([http1.destroy(), h2c.destroy()]);
  };
  return {
    http1,
    h2c,
    close: (timeoutMs = 2000) => {
      closing ??= close(timeoutMs);
      return closing;
    },
  };
}
