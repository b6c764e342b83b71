// Test-only: the part of pool-managerd that models on demand talks to — POST /v2/pools (a load)
// and DELETE /v2/pools/{id} (an unload) — on a real socket, recording what it was asked and
// answering what the test says. Pools and memory reach orchestratord through the test's own
// register and heartbeat calls, so a test decides when a load is "seen", ready or failed.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { PoolLoadRequestSchema, type PoolLoadRequest } from '@llama-orch/contracts';

export interface NodeReply {
  readonly status: number;
  readonly body?: unknown;
}

export interface OnDemandNode {
  readonly url: string;
  /** Load requests received (parsed with the contract's schema), in arrival order. */
  readonly loads: PoolLoadRequest[];
  /** Unloads received, in arrival order. */
  readonly unloads: Array<{ pool_id: string; deadline_ms: number | undefined }>;
  /** The Authorization header of every request. */
  readonly auth: Array<string | undefined>;
  /** How the next loads are answered. @default 202 with a provisioning pool status */
  answerLoad: (body: PoolLoadRequest) => NodeReply;
  /** How the next unloads are answered. @default 202 */
  answerUnload: (poolId: string) => NodeReply;
  /** Delay before answering a load, ms (a slow node: concurrent loads overlap). @default 0 */
  loadDelayMs: number;
  close(): Promise<void>;
}

/** The envelope a refusing node sends. */
export function refusal(status: number, code: string, message: string): NodeReply {
  return { status, body: { code, message, retriable: status === 503 } };
}

export async function onDemandNode(): Promise<OnDemandNode> {
  const node: Omit<OnDemandNode, 'url' | 'close'> = {
    loads: [],
    unloads: [],
    auth: [],
    answerLoad: (body) => ({
      status: 202,
      body: {
        pool_id: body.pool_id,
        state: 'provisioning',
        ready: false,
        draining: false,
        slots_total: body.slots,
        slots_free: 0,
        models: [body.model],
        ctx: 0,
        deterministic: false,
        decode_tps: 0,
        live: false,
        active_leases: 0,
        restarts: 0,
        breaker: 'closed',
        updated_at: new Date().toISOString(),
        origin: 'catalog',
      },
    }),
    answerUnload: () => ({ status: 202, body: {} }),
    loadDelayMs: 0,
  };
  const send = (res: ServerResponse, reply: NodeReply): void => {
    res.writeHead(reply.status, { 'content-type': 'application/json' }).end(JSON.stringify(reply.body ?? {}));
  };
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    let raw = '';
    req.on('data', (c: Buffer) => {
      raw += c.toString();
    });
    req.on('end', () => {
      node.auth.push(req.headers.authorization);
      const url = new URL(req.url ?? '/', 'http://x');
      if (req.method === 'POST' && url.pathname === '/v2/pools') {
        const body = PoolLoadRequestSchema.parse(JSON.parse(raw));
        node.loads.push(body);
        setTimeout(() => send(res, node.answerLoad(body)), node.loadDelayMs);
        return;
      }
      const unload = /^\/v2\/pools\/([^/]+)$/.exec(url.pathname);
      if (req.method === 'DELETE' && unload !== null) {
        const poolId = decodeURIComponent(unload[1] as string);
        const deadline = url.searchParams.get('deadline_ms');
        node.unloads.push({ pool_id: poolId, deadline_ms: deadline === null ? undefined : Number(deadline) });
        send(res, node.answerUnload(poolId));
        return;
      }
      send(res, refusal(404, 'NOT_FOUND', `no route ${req.method} ${url.pathname}`));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return Object.assign(node, {
    url,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  });
}
