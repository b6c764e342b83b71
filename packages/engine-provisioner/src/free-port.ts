import { createServer } from 'node:net';

/** Binds `host:port` and releases it; resolves the bound port, or undefined when it is taken. */
function tryBind(port: number, host: string): Promise<number | undefined> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.unref();
    srv.once('error', () => resolve(undefined));
    srv.listen({ port, host, exclusive: true }, () => {
      const addr = srv.address();
      const bound = typeof addr === 'object' && addr ? addr.port : undefined;
      srv.close(() => resolve(bound));
    });
  });
}

/**
 * A port that is free on `host` right now (the OS picks it). Another process may take it before
 * the engine binds; the engine then exits with a bind error and its supervisor retries with a new
 * prepare.
 *
 * @param host @default 127.0.0.1
 */
export async function findFreePort(host = '127.0.0.1'): Promise<number> {
  const port = await tryBind(0, host);
  if (port === undefined) throw new Error(`cannot bind any port on ${host}`);
  return port;
}

/** How many ports after a taken configured port are tried before asking the OS. */
export const PORT_FALLBACK_SPAN = 100;

/**
 * The port an engine should use: `requested` when free; a taken port falls back to the next free
 * one within {@link PORT_FALLBACK_SPAN}, then to an OS-assigned one; `0` asks the OS directly.
 */
export async function selectPort(requested: number, host = '127.0.0.1'): Promise<{ port: number; fallback: boolean }> {
  if (requested === 0) return { port: await findFreePort(host), fallback: false };
  for (let p = requested; p < Math.min(requested + PORT_FALLBACK_SPAN, 65536); p++) {
    if ((await tryBind(p, host)) !== undefined) return { port: p, fallback: p !== requested };
  }
  return { port: await findFreePort(host), fallback: true };
}
