// Real sockets: a node:http server on port 0 answers with TaskEventStream; clients are raw TCP
// sockets, so a test can stop reading (back-pressure) or leave whenever it likes.
import { once } from 'node:events';
import { createServer, type Server, type ServerResponse } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';
import { formatSseFrame, type ErrorEvent, type SseFrame } from '@llama-orch/contracts';
import { afterEach, describe, expect, it } from 'vitest';
import { V2_SSE, type FrameEncoder } from './frame-encoder.js';
import { TaskEventStream, type TaskEventStreamOptions } from './task-event-stream.js';
import { TaskStream } from './task-stream.js';

const started: SseFrame = { event: 'started', data: { queue_position: 0, predicted_start_ms: 0 } };
const end: SseFrame = { event: 'end', data: { tokens_out: 1, decode_ms: 1, decode_time_ms: 1 } };
const failure: ErrorEvent = { code: 'POOL_UNAVAILABLE', message: 'no pool', retriable: true };

interface Served {
  url: { port: number };
  sockets: Socket[];
}

let server: Server | undefined;
const clients: Socket[] = [];

afterEach(async () => {
  for (const c of clients.splice(0)) c.destroy();
  if (server !== undefined) {
    server.closeAllConnections();
    server.close();
    server = undefined;
  }
});

/** A server whose every request gets `serve(res)`. */
async function listen(serve: (res: ServerResponse) => void): Promise<Served> {
  const sockets: Socket[] = [];
  server = createServer((_req, res) => serve(res));
  server.on('connection', (s) => sockets.push(s));
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return { url: { port: (server.address() as AddressInfo).port }, sockets };
}

/**
 * A raw GET; `text()` is everything received so far; `ended` settles with the response's last
 * chunk (an event stream's head says `connection: keep-alive`, so the socket stays open).
 */
function get(port: number): { socket: Socket; text: () => string; ended: Promise<void> } {
  const socket = connect(port, '127.0.0.1');
  clients.push(socket);
  let received = '';
  socket.setEncoding('utf8');
  socket.on('data', (d: string) => (received += d));
  const ended = until(
    () => received.endsWith('\r\n0\r\n\r\n') || socket.readableEnded,
    'the end of the response',
    5000,
  );
  socket.write('GET /events HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n');
  return { socket, text: () => received, ended };
}

/** The body of a chunked HTTP/1.1 response, de-chunked. */
function body(raw: string): string {
  const head = raw.slice(0, raw.indexOf('\r\n\r\n'));
  let rest = raw.slice(head.length + 4);
  if (!/\r\ntransfer-encoding: chunked/i.test(head)) return rest;
  let out = '';
  for (;;) {
    const nl = rest.indexOf('\r\n');
    if (nl < 0) return out;
    const size = Number.parseInt(rest.slice(0, nl), 16);
    if (size === 0 || Number.isNaN(size)) return out;
    const chunk = Buffer.from(rest.slice(nl + 2), 'utf8')
      .subarray(0, size)
      .toString('utf8');
    out += chunk;
    rest = rest.slice(nl + 2 + chunk.length + 2);
  }
}

async function until(cond: () => boolean, what: string, ms = 3000): Promise<void> {
  const t0 = Date.now();
  while (!cond()) {
    if (Date.now() - t0 > ms) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

function options(
  res: ServerResponse,
  stream: TaskStream,
  over: Partial<TaskEventStreamOptions> = {},
): TaskEventStreamOptions {
  return {
    res,
    stream,
    encoder: V2_SSE,
    keepaliveMs: 60_000,
    headers: { 'x-correlation-id': 'c1' },
    onAbandoned: () => undefined,
    ...over,
  };
}

describe('TaskEventStream', () => {
  it('writes each record through the encoder as it is appended, and ends with the terminal frame', async () => {
    const stream = new TaskStream();
    stream.append(started);
    const { url } = await listen((res) => new TaskEventStream(options(res, stream)));
    const c = get(url.port);
    await until(() => c.text().includes('event: started'), 'the first frame');
    expect(c.text()).toMatch(
      /^HTTP\/1.1 200 OK\r\n[^]*content-type: text\/event-stream; charset=utf-8\r\n[^]*x-correlation-id: c1\r\n/,
    );
    const frames: SseFrame[] = [
      started,
      { event: 'token', data: { t: 'é "q"\n', i: 0 } },
      { event: 'token', data: { t: 'b', i: 1, delta: { tool_calls: [] } } },
      end,
    ];
    for (const f of frames.slice(1)) stream.append(f);
    await c.ended;
    expect(body(c.text())).toBe(frames.map((f, id) => formatSseFrame(id, f)).join(''));
  });

  it('a log that moved to another replica ends the response after what it has, without a terminal frame (the client reconnects there)', async () => {
    const stream = new TaskStream();
    stream.append(started);
    const token: SseFrame = { event: 'token', data: { t: 'a', i: 0 } };
    stream.append(token);
    let left = 0;
    const { url } = await listen(
      (res) => new TaskEventStream(options(res, stream, { onAbandoned: () => void (left += 1) })),
    );
    const c = get(url.port);
    await until(() => c.text().includes('event: token'), 'the token');
    stream.moved();
    await c.ended;
    expect(body(c.text())).toBe([started, token].map((f, id) => formatSseFrame(id, f)).join(''));
    // one that resumes here afterwards gets the rest it can (none) and the same end
    const late = get(url.port);
    await late.ended;
    expect(body(late.text())).toBe([started, token].map((f, id) => formatSseFrame(id, f)).join(''));
    expect(left).toBe(0);
  });

  it('a client that stops reading: writes wait for drain while the log grows, then every frame arrives in order', async () => {
    const stream = new TaskStream();
    stream.append(started);
    let served: TaskEventStream | undefined;
    const { url } = await listen((res) => (served = new TaskEventStream(options(res, stream))));
    const c = get(url.port);
    await until(() => served !== undefined && c.text().includes('event: started'), 'the stream');
    c.socket.pause();
    const piece = 'x'.repeat(4096);
    let n = 0;
    while (!(served as TaskEventStream).waitingDrain && n < 10_000)
      stream.append({ event: 'token', data: { t: piece, i: n++ } });
    expect(served?.waitingDrain).toBe(true);
    const appendedWhileFull = n + 5;
    while (n < appendedWhileFull) stream.append({ event: 'token', data: { t: piece, i: n++ } });
    stream.append(end);
    c.socket.resume();
    await c.ended;
    const text = body(c.text());
    expect(text.match(/event: token/g)).toHaveLength(n);
    expect(text.endsWith(formatSseFrame(n + 1, end))).toBe(true);
  });

  it('a client leaving before the end: onAbandoned once the last reader is gone, not while another reads', async () => {
    const stream = new TaskStream();
    stream.append(started);
    let abandoned = 0;
    const { url } = await listen(
      (res) => new TaskEventStream(options(res, stream, { onAbandoned: () => (abandoned += 1) })),
    );
    const a = get(url.port);
    const b = get(url.port);
    await until(() => stream.subscriberCount === 2, 'two subscribers');
    a.socket.destroy();
    await until(() => stream.subscriberCount === 1, 'one subscriber left');
    expect(abandoned).toBe(0);
    b.socket.destroy();
    await until(() => abandoned === 1, 'the task abandoned');
    expect(stream.subscriberCount).toBe(0);
  });

  it('lazy head: nothing is sent for frames the door skips; an error before the first write goes to onRefused with no head', async () => {
    const stream = new TaskStream();
    stream.append(started);
    const skipTokens: FrameEncoder = {
      verbose: false,
      encode: (id, f) => (f.event === 'token' ? formatSseFrame(id, f) : ''),
    };
    const refused: ErrorEvent[] = [];
    const { url } = await listen(
      (res) =>
        new TaskEventStream(
          options(res, stream, {
            encoder: skipTokens,
            lazyHead: true,
            onRefused: (err) => {
              refused.push(err);
              res.writeHead(503, { 'retry-after': '1' }).end('{}');
            },
          }),
        ),
    );
    const c = get(url.port);
    await until(() => stream.subscriberCount === 1, 'the subscriber');
    stream.append({ event: 'metrics', data: { queue_depth: 1, on_time_probability: 1 } });
    await new Promise((r) => setTimeout(r, 50));
    expect(c.text()).toBe('');
    stream.append({ event: 'error', data: failure });
    await c.ended;
    expect(body(c.text())).toBe('{}');
    expect(refused).toEqual([failure]);
    expect(c.text()).toMatch(/^HTTP\/1.1 503 /);
    expect(stream.subscriberCount).toBe(0);
  });

  it('lazy head: the first keep-alive sends the head, then the comment', async () => {
    const stream = new TaskStream();
    stream.append(started);
    const { url } = await listen(
      (res) =>
        new TaskEventStream(
          options(res, stream, { encoder: { verbose: false, encode: () => '' }, lazyHead: true, keepaliveMs: 30 }),
        ),
    );
    const c = get(url.port);
    await until(() => c.text().includes(': keep-alive\n\n'), 'a keep-alive');
    expect(c.text()).toMatch(/^HTTP\/1.1 200 OK\r\n[^]*text\/event-stream/);
  });

  it('a resume after the terminal frame writes the rest and ends', async () => {
    const stream = new TaskStream();
    stream.append(started);
    stream.append({ event: 'token', data: { t: 'a', i: 0 } });
    stream.append(end);
    const { url } = await listen((res) => new TaskEventStream(options(res, stream, { afterId: 1 })));
    const c = get(url.port);
    await c.ended;
    expect(body(c.text())).toBe(formatSseFrame(2, end));
  });

  it('a client whose ids ran ahead of the log (a taken-over task that ended before its tokens came back) gets the terminal frame under the id after its own', async () => {
    // the adopter's log: started, padding up to the dispatch's first token id (2), then the end
    const stream = new TaskStream();
    stream.append(started);
    stream.append({ event: 'metrics', data: { queue_depth: 0, on_time_probability: 1 } });
    stream.append(end);
    const { url } = await listen((res) => new TaskEventStream(options(res, stream, { afterId: 5 })));
    const c = get(url.port);
    await c.ended;
    expect(body(c.text())).toBe(formatSseFrame(6, end));
  });
});
