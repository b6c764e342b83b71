import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  HeartbeatRequestSchema,
  NodeRegisterRequestSchema,
  type HeartbeatRequest,
  type NodeRegisterRequest,
} from '@llama-orch/contracts';

/**
 * Test fixture standing in for orchestratord's node API (a real node:http server): records
 * registrations and heartbeats (zod-parsed, so a malformed request fails the test), can forget the
 * node (heartbeat → 404) and checks the Bearer token.
 */
export class FakeOrchestrator {
  readonly registrations: NodeRegisterRequest[] = [];
  readonly heartbeats: Array<{ nodeId: string; body: HeartbeatRequest; at: number }> = [];
  /** Arrival time (Date.now()) of each registration, by index. */
  readonly registrationTimes: number[] = [];
  readonly deregistrations: string[] = [];
  readonly rejected: string[] = [];
  known = new Set<string>();
  nextHeartbeatMs = 100;
  /** Heartbeats still to hold unanswered (a replica that stalls behind a balancer); each is counted in `held`. */
  hangHeartbeats = 0;
  held = 0;
  #server: Server | undefined;

  constructor(private readonly token?: string) {}

  get url(): string {
    const a = this.#server?.address() as AddressInfo | null | undefined;
    if (a == null) throw new Error('not listening');
    return `http://127.0.0.1:${a.port}`;
  }

  /** Forget every node: the next heartbeat gets 404. */
  forget(): void {
    this.known.clear();
  }

  async listen(port = 0): Promise<void> {
    const server = createServer((req, res) => {
      void this.#handle(req).then(
        ({ status, body }) => {
          res.writeHead(status, { 'content-type': 'application/json' });
          res.end(body === undefined ? undefined : JSON.stringify(body));
        },
        (err: unknown) => {
          this.rejected.push(String(err));
          res.writeHead(400, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ code: 'INVALID_PARAMS', message: String(err) }));
        },
      );
    });
    await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
    this.#server = server;
  }

  async close(): Promise<void> {
    const s = this.#server;
    this.#server = undefined;
    if (s === undefined) return;
    s.closeAllConnections();
    await new Promise<void>((resolve) => s.close(() => resolve()));
  }

  async #handle(req: IncomingMessage): Promise<{ status: number; body?: unknown }> {
    if (this.token !== undefined && req.headers.authorization !== `Bearer ${this.token}`)
      return { status: 401, body: { code: 'UNAUTHORIZED', message: 'bad token' } };
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const text = Buffer.concat(chunks).toString('utf8');
    const url = req.url ?? '';
    if (req.method === 'POST' && url === '/v2/nodes/register') {
      const body = NodeRegisterRequestSchema.parse(JSON.parse(text));
      this.registrations.push(body);
      this.registrationTimes.push(Date.now());
      this.known.add(body.node_id);
      return { status: 200, body: { next_heartbeat_ms: this.nextHeartbeatMs } };
    }
    const hb = /^\/v2\/nodes\/([^/]+)\/heartbeat$/.exec(url);
    if (req.method === 'POST' && hb?.[1] !== undefined) {
      const nodeId = decodeURIComponent(hb[1]);
      if (!this.known.has(nodeId)) return { status: 404, body: { code: 'NOT_FOUND', message: 'unknown node' } };
      if (this.hangHeartbeats > 0) {
        this.hangHeartbeats -= 1;
        this.held += 1;
        return new Promise(() => undefined);
      }
      this.heartbeats.push({ nodeId, body: HeartbeatRequestSchema.parse(JSON.parse(text)), at: Date.now() });
      return { status: 200, body: { next_heartbeat_ms: this.nextHeartbeatMs } };
    }
    const del = /^\/v2\/nodes\/([^/]+)$/.exec(url);
    if (req.method === 'DELETE' && del?.[1] !== undefined) {
      this.deregistrations.push(decodeURIComponent(del[1]));
      this.known.delete(decodeURIComponent(del[1]));
      return { status: 204 };
    }
    return { status: 404, body: { code: 'NOT_FOUND', message: url } };
  }
}
