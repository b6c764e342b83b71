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

/**
 * The dispatchers orchestratord reaches nodes with. With HTTP/1.1 every in-flight task holds a
 * socket to its node, so one process could relay at most half its open-file limit in streams;
 * over h2c a node costs one socket however many tasks it runs.
 */
export function createUpstreamDispatchers(): UpstreamDispatchers {
  const http1 = new Agent({ connections: 256, keepAliveTimeout: 10_000 });
  const h2c = new Agent({
    keepAliveTimeout: 60_000,
    factory: (origin, opts) => new H2CClient(origin, { ...opts, maxConcurrentStreams: H2C_STREAMS_PER_NODE, pipelining: H2C_STREAMS_PER_NODE }),
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
