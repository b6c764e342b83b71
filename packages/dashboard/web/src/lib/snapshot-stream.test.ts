import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import type { DashboardSnapshot } from '@llama-orch/contracts';
import { sampleSnapshot } from '../testing/sample-snapshot.js';
import { ApiClient } from './api.js';
import { KeyStore } from './key-store.js';
import { SnapshotStream, type StreamStatus } from './snapshot-stream.js';

// A real loopback server stands in for orchestratord's event route; each connection is answered by
// the next scripted handler, so a test can play 401s, ended streams, silence and bad frames.
type Handler = (req: IncomingMessage, res: ServerResponse) => void;

const servers: Server[] = [];
const streams: SnapshotStream[] = [];
afterEach(async () => {
  for (const s of streams.splice(0)) s.close();
  await Promise.all(
    servers.splice(0).map(
      (s) =>
        new Promise((r) => {
          s.closeAllConnections();
          s.close(r);
        }),
    ),
  );
});

async function serve(handlers: Handler[]): Promise<{ url: string; requests: IncomingMessage[] }> {
  const requests: IncomingMessage[] = [];
  const server = createServer((req, res) => {
    requests.push(req);
    const h = handlers[Math.min(requests.length - 1, handlers.length - 1)]!;
    h(req, res);
  });
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, requests };
}

const sseHead = (res: ServerResponse): void => {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-store' });
  res.flushHeaders();
};
const frame = (s: DashboardSnapshot): string => `event: snapshot\ndata: ${JSON.stringify(s)}\n\n`;
const unauthorized: Handler = (_req, res) => {
  res
    .writeHead(401, { 'content-type': 'application/json' })
    .end(JSON.stringify({ code: 'UNAUTHORIZED', message: 'missing or invalid API key' }));
};
/** Sends one snapshot per version and keeps the stream open. */
const snapshots =
  (...versions: string[]): Handler =>
  (_req, res) => {
    sseHead(res);
    for (const v of versions) res.write(frame(sampleSnapshot({ version: v })));
  };

function open(url: string, keys = new KeyStore(undefined), opts: { idleTimeoutMs?: number } = {}) {
  const seen: DashboardSnapshot[] = [];
  const statuses: StreamStatus[] = [];
  const waiters: Array<() => void> = [];
  const stream = new SnapshotStream({
    api: new ApiClient({ keys, baseUrl: url }),
    onSnapshot: (s) => {
      seen.push(s);
      waiters.splice(0).forEach((w) => w());
    },
    onStatus: (s) => {
      statuses.push(s);
      waiters.splice(0).forEach((w) => w());
    },
    backoff: { initialMs: 20, maxMs: 100, jitter: 0 },
    ...opts,
  });
  streams.push(stream);
  /** Resolves once `check` holds (re-checked after every callback). */
  const until = async (check: () => boolean, what: string): Promise<void> => {
    const deadline = Date.now() + 10_000;
    while (!check()) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}: ${JSON.stringify(statuses)}`);
      await new Promise<void>((r) => {
        waiters.push(r);
        setTimeout(r, 50);
      });
    }
  };
  return { stream, seen, statuses, until, keys };
}

describe('SnapshotStream', () => {
  it('on 401 waits for a key; with the key it sends Bearer and goes live', async () => {
    const srv = await serve([
      (req, res) => (req.headers.authorization === 'Bearer k1' ? snapshots('v1')(req, res) : unauthorized(req, res)),
    ]);
    const s = open(srv.url);
    s.stream.start();
    await s.until(() => s.stream.status.state === 'needs_key', 'needs_key');
    expect(s.stream.status).toEqual({ state: 'needs_key', reason: 'missing or invalid API key' });
    await new Promise((r) => setTimeout(r, 100));
    expect(srv.requests).toHaveLength(1); // a 401 is not retried

    s.keys.set('k1');
    s.stream.reconnect();
    await s.until(() => s.seen.length === 1, 'a snapshot');
    expect(s.stream.status.state).toBe('live');
    expect(srv.requests[1]!.headers.authorization).toBe('Bearer k1');
    expect(srv.requests[1]!.headers.accept).toBe('text/event-stream');
    expect(s.seen[0]!.version).toBe('v1');
  });

  it('a 403 (key without the role) stops retrying too', async () => {
    const srv = await serve([
      (_req, res) =>
        res
          .writeHead(403, { 'content-type': 'application/json' })
          .end(JSON.stringify({ code: 'FORBIDDEN', message: 'role client may not' })),
    ]);
    const s = open(srv.url);
    s.stream.start();
    await s.until(() => s.stream.status.state === 'forbidden', 'forbidden');
    expect(s.stream.status).toEqual({ state: 'forbidden', reason: 'role client may not' });
  });

  it('reconnects with backoff when the stream ends or the server fails, and keeps delivering', async () => {
    const srv = await serve([
      (_req, res) => {
        sseHead(res);
        res.end(frame(sampleSnapshot({ version: 'a' })));
      },
      (_req, res) => res.writeHead(503).end(),
      snapshots('b', 'c'),
    ]);
    const s = open(srv.url);
    s.stream.start();
    await s.until(() => s.seen.length === 3, 'three snapshots');
    expect(s.seen.map((x) => x.version)).toEqual(['a', 'b', 'c']);
    const retries = s.statuses.filter((x) => x.state === 'retrying');
    expect(retries.map((x) => x.state === 'retrying' && [x.attempt, x.reason])).toEqual([
      [1, 'the event stream ended'],
      [2, 'HTTP 503 Service Unavailable'],
    ]);
    expect(s.stream.status.state).toBe('live');
  });

  it('a malformed snapshot frame is a broken stream: reconnect, never a half-rendered page', async () => {
    const srv = await serve([
      (_req, res) => {
        sseHead(res);
        res.write('event: snapshot\ndata: {"nodes":[]}\n\n');
      },
      snapshots('ok'),
    ]);
    const s = open(srv.url);
    s.stream.start();
    await s.until(() => s.seen.length === 1, 'a snapshot');
    expect(s.seen[0]!.version).toBe('ok');
    expect(s.statuses.find((x) => x.state === 'retrying')).toMatchObject({
      reason: 'snapshot frame lacks the DashboardSnapshot fields',
    });
  });

  it('reconnects a connection that went silent (no frame, no keep-alive)', async () => {
    const srv = await serve([(_req, res) => sseHead(res), snapshots('after-silence')]);
    const s = open(srv.url, undefined, { idleTimeoutMs: 200 });
    s.stream.start();
    await s.until(() => s.seen.length === 1, 'a snapshot');
    expect(s.statuses.find((x) => x.state === 'retrying')).toMatchObject({ reason: 'nothing received for 200 ms' });
  });

  it('keep-alive comments hold a quiet connection open', async () => {
    let timer: NodeJS.Timeout | undefined;
    const srv = await serve([
      (_req, res) => {
        snapshots('v')(_req, res);
        timer = setInterval(() => res.write(': keep-alive\n\n'), 50);
      },
    ]);
    const s = open(srv.url, undefined, { idleTimeoutMs: 200 });
    s.stream.start();
    await s.until(() => s.seen.length === 1, 'a snapshot');
    await new Promise((r) => setTimeout(r, 600));
    clearInterval(timer);
    expect(srv.requests).toHaveLength(1);
    expect(s.stream.status.state).toBe('live');
  });

  it('close() is idempotent, aborts the request and stops every retry', async () => {
    const srv = await serve([(_req, res) => res.writeHead(500).end()]);
    const s = open(srv.url);
    s.stream.start();
    await s.until(() => s.statuses.some((x) => x.state === 'retrying'), 'a retry');
    s.stream.close();
    s.stream.close();
    const count = srv.requests.length;
    const seenStatuses = s.statuses.length;
    await new Promise((r) => setTimeout(r, 300));
    expect(srv.requests.length).toBe(count);
    expect(s.statuses.length).toBe(seenStatuses);
    expect(s.stream.status).toEqual({ state: 'closed' });
  });
});
