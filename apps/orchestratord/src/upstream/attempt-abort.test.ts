import { createServer as createHttpServer, type Server } from 'node:http';
import { createServer as createH2Server, type Http2Server } from 'node:http2';
import type { AddressInfo } from 'node:net';
import { once } from 'node:events';
import { Agent, H2CClient, type Dispatcher } from 'undici';
import { describe, expect, it } from 'vitest';
import { AttemptAbort } from './attempt-abort.js';
import { streamRequest } from './stream-request.js';

/** A request's controller as undici hands it to a handler, recording the aborts it gets. */
class FakeRequest implements Dispatcher.DispatchController {
  readonly aborts: Error[] = [];
  get aborted(): boolean {
    return this.aborts.length > 0;
  }
  get paused(): boolean {
    return false;
  }
  get reason(): Error | null {
    return this.aborts[0] ?? null;
  }
  abort(reason: Error): void {
    this.aborts.push(reason);
  }
  pause(): void {}
  resume(): void {}
}

describe('AttemptAbort', () => {
  it('aborts once: the reason kept (an AbortError when none is given), the running request aborted with it', () => {
    const a = new AttemptAbort();
    expect([a.aborted, a.reason]).toEqual([false, undefined]);
    const request = new FakeRequest();
    a.attach(request);
    const reason = new Error('canceled');
    a.abort(reason);
    a.abort(new Error('later'));
    expect([a.aborted, a.reason, request.aborts]).toEqual([true, reason, [reason]]);
    const plain = new AttemptAbort();
    plain.abort();
    expect(plain.reason).toBeInstanceOf(DOMException);
    expect(plain.reason?.name).toBe('AbortError');
  });

  it('an abort before the request started is applied when it starts; one after the request is over reaches it no more', () => {
    const early = new AttemptAbort();
    const reason = new Error('canceled early');
    early.abort(reason);
    const request = new FakeRequest();
    early.attach(request);
    expect(request.aborts).toEqual([reason]);

    const late = new AttemptAbort();
    const done = new FakeRequest();
    late.attach(done);
    late.detach();
    late.abort(new Error('after the end'));
    expect([late.aborted, done.aborts]).toEqual([true, []]);
  });

  it.each([
    ['HTTP/1.1', false],
    ['h2c', true],
  ])(
    'aborts a real undici request through its controller (%s): mid-stream the body fails with the reason and the node sees the request go; before the headers the request rejects with it',
    async (_proto, h2c) => {
      let server: Server | Http2Server;
      const closed: Promise<unknown>[] = [];
      if (h2c) {
        const h2 = createH2Server();
        h2.on('stream', (stream) => {
          closed.push(once(stream, 'close'));
          stream.respond({ ':status': 200, 'content-type': 'application/x-ndjson' });
          stream.write('{"type":"token","t":"a","i":0}\n');
        });
        server = h2;
      } else {
        // A node that answers headers and then streams until the request goes away.
        server = createHttpServer((_req, res) => {
          closed.push(once(res, 'close'));
          res.writeHead(200, { 'content-type': 'application/x-ndjson' });
          res.write('{"type":"token","t":"a","i":0}\n');
        });
      }
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      const dispatcher: Dispatcher = h2c ? new H2CClient(origin) : new Agent();
      const options: Dispatcher.DispatchOptions = { origin, path: '/', method: 'POST', body: '{}', idempotent: true };
      try {
        const abort = new AttemptAbort();
        const res = await streamRequest(dispatcher, options, abort);
        expect(res.statusCode).toBe(200);
        const failed = new Promise<unknown>((resolve) => res.body.once('error', resolve));
        const reason = new Error('task canceled');
        abort.abort(reason);
        expect(await failed).toBe(reason);
        await Promise.all(closed); // the node saw its request go away

        // Aborted before the headers: the request rejects with the reason.
        const early = new AttemptAbort();
        const pending = streamRequest(dispatcher, options, early);
        early.abort(reason);
        await expect(pending).rejects.toBe(reason);
        // Aborted before it was sent: nothing is dispatched.
        const refusing = dispatcher.compose(() => (_opts, _handler) => {
          throw new Error('dispatched');
        });
        await expect(streamRequest(refusing, options, early)).rejects.toBe(reason);
      } finally {
        await dispatcher.destroy();
        await new Promise((resolve) => server.close(resolve));
      }
    },
  );
});
