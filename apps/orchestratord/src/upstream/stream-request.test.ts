import { createServer as createHttpServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createH2Server } from 'node:http2';
import type { AddressInfo } from 'node:net';
import { once } from 'node:events';
import { text } from 'node:stream/consumers';
import { Agent, H2CClient, type Dispatcher } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { AttemptAbort } from './attempt-abort.js';
import { readDispatchEvents } from './dispatch-events.js';
import { ResponseBody, streamRequest } from './stream-request.js';

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function http1(
  handler: (req: IncomingMessage, res: ServerResponse) => void,
): Promise<{ origin: string; dispatcher: Dispatcher }> {
  const server: Server = createHttpServer(handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(() => new Promise((resolve) => server.close(resolve)));
  const dispatcher = new Agent();
  cleanups.push(() => dispatcher.destroy());
  return { origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, dispatcher };
}

const TOKEN = '{"type":"token","t":"a","i":0}\n';

describe('streamRequest', () => {
  it.each([
    ['HTTP/1.1', false],
    ['h2c', true],
  ])('a reader that stops reading closes the request (%s): the node sees it go', async (_proto, h2c) => {
    const closed: Promise<unknown>[] = [];
    let origin: string;
    let dispatcher: Dispatcher;
    if (h2c) {
      const server = createH2Server();
      server.on('stream', (stream) => {
        closed.push(once(stream, 'close'));
        stream.respond({ ':status': 200 });
        stream.write(TOKEN);
      });
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      cleanups.push(() => new Promise((resolve) => server.close(resolve)));
      origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      dispatcher = new H2CClient(origin);
      cleanups.push(() => dispatcher.destroy());
    } else {
      ({ origin, dispatcher } = await http1((_req, res) => {
        closed.push(once(res, 'close'));
        res.writeHead(200);
        res.write(TOKEN);
      }));
    }
    const res = await streamRequest(
      dispatcher,
      { origin, path: '/', method: 'POST', body: '{}', idempotent: true },
      new AttemptAbort(),
    );
    let seen = 0;
    await readDispatchEvents(res.body, () => {
      seen += 1;
      return false; // stop: readDispatchEvents destroys the body
    });
    expect(seen).toBe(1);
    await Promise.all(closed);
  });

  it('holds the node back while the reader does not read (the body buffers about its high-water mark), then delivers every byte', async () => {
    const total = 8 * 1024 * 1024;
    const { origin, dispatcher } = await http1((_req, res) => {
      res.writeHead(200);
      const chunk = Buffer.alloc(64 * 1024, 0x61);
      let sent = 0;
      const more = (): void => {
        while (sent < total) {
          sent += chunk.length;
          if (!res.write(chunk)) return void res.once('drain', more);
        }
        res.end();
      };
      more();
    });
    const res = await streamRequest(dispatcher, { origin, path: '/', method: 'GET' }, new AttemptAbort());
    await new Promise((resolve) => setTimeout(resolve, 300));
    // Without the controller's pause undici would have pushed all it read into the body.
    expect(res.body.readableLength).toBeLessThan(1024 * 1024);
    expect((await text(res.body)).length).toBe(total);
  });

  it("reads a refusal's body to its end", async () => {
    const { origin, dispatcher } = await http1((_req, res) => {
      res.writeHead(503, { 'content-type': 'application/json' });
      res.end('{"code":"POOL_UNREADY"}');
    });
    const res = await streamRequest(dispatcher, { origin, path: '/', method: 'GET' }, new AttemptAbort());
    expect(res.statusCode).toBe(503);
    expect(await text(res.body)).toBe('{"code":"POOL_UNREADY"}');
  });

  it('a body that fails in the turn its response was resolved still reaches the reader that awaited it', async () => {
    const request: Dispatcher.DispatchController = {
      aborted: false,
      paused: false,
      reason: null,
      abort: () => undefined,
      pause: () => undefined,
      resume: () => undefined,
    };
    const body = new ResponseBody(request);
    // As undici calls a handler: one I/O callback that resolves the response and then fails it
    // (Node runs the callback's nextTicks, then the awaiting reader's continuation).
    const resolved = new Promise<ResponseBody>((resolve) =>
      setImmediate(() => {
        resolve(body);
        body.fail(new Error('connection lost'));
      }),
    );
    await expect(readDispatchEvents(await resolved, () => true)).rejects.toThrow(/event stream from node broke/);
  });

  it('an unreachable node rejects before any response', async () => {
    const { origin, dispatcher } = await http1(() => undefined);
    const port = new URL(origin).port;
    await cleanups.splice(0, 1)[0]?.(); // the server closes: nothing listens on its port
    await expect(
      streamRequest(dispatcher, { origin: `http://127.0.0.1:${port}`, path: '/', method: 'GET' }, new AttemptAbort()),
    ).rejects.toThrow(/ECONNREFUSED/);
  });
});
