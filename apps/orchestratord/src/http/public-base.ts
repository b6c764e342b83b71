import type { FastifyInstance, FastifyRequest } from 'fastify';
import { splitHostPort } from '@llama-orch/daemon-support';

/**
 * The absolute base URL clients reach this server at, for the stream URLs of a 202:
 * `public_url` when configured; else the bound address (the Host header for a wildcard bind);
 * else `http://<addr>` before listening. The bound port is read from the socket once and kept.
 */
export function publicBaseResolver(
  app: FastifyInstance,
  addr: string,
  publicUrl: string | undefined,
): (req: FastifyRequest) => string {
  const configured = publicUrl?.replace(/\/+$/, '');
  const { host: bindHost } = splitHostPort(addr);
  const wildcard = bindHost === '0.0.0.0' || bindHost === '::' || bindHost === '';
  let boundBase: string | undefined;
  return (req) => {
    if (configured !== undefined) return configured;
    if (boundBase !== undefined) return boundBase;
    const address = app.server.address();
    if (address !== null && typeof address === 'object') {
      if (wildcard) return `http://${req.host}`;
      const host = bindHost.includes(':') ? `[${bindHost}]` : bindHost;
      boundBase = `http://${host}:${address.port}`;
      return boundBase;
    }
    return `http://${addr}`;
  };
}
