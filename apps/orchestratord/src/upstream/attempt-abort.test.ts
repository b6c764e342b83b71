import { createServer as createHttpServer, type Server } from 'node:http';
import { createServer as createH2Server, type Http2Server } from 'node:http2';
import type { AddressInfo } from 'node:net';
import { once } from 'node:events';
import { Agent, H2CClient, type Dispatcher } from 'undici';
import { describe, expect, it } from 'vitest';
import { AttemptAbort } from './attempt-abort.js';

/** Counts the listeners undici adds and removes. */
class CountingAbort extends AttemptAbort {
  added = 0;
  removed = 0;
  override addEventListener(type: 'abort', listener: () => void): void {
    this.added += 1;
    super.addEventListener(type, listener);
  }

  override removeEventListener(type: 'abort', listener: () => void): void {
    this.removed += 1;
    super.removeEventListener(type, listener);
  }
}

describe('AttemptAbort', () => {
  it('aborts once: the reason kept (an AbortError when none is given), listeners run once, a removed one never', () => {
    const a = new AttemptAbort();
    expect([a.aborted, a.reason]).toEqual([false, undefined]);
    const calls: string[] = [];
    const gone = (): number => calls.push('gone');
    a.addEventListener('abort', () => calls.push('one'));
    a.addEventListener('abort', gone);
    a.removeEventListener('abort', gone);
    const reason = new Error('canceled');
    a.abort(reason);
    a.abort(new Error('later'));
    expect([a.aborted, a.reason, calls]).toEqual([true, reason, ['one']]);
    a.addEventListener('abort', () => calls.push('late'));
    expect(calls).toEqual(['one']);
    const plain = new AttemptAbort();
    plain.abort();
    expect(plain.reason).toBeInstanceOf(DOMException);
    expect((plain.reason as DOMException).name).toBe('AbortError');
  });

  // A node that answers headers and then streams until the request goes away.
  const endless = (res: { writeHead(s: number, h: Record<string, string>): unknown; write(s: string): unknown }): void => {
    res.writeHead(200, { 'content-type': 'application/x-ndjson' });
    res.write('{"type":"token","t":"a","i":0}\n');
  };

  it.each([
    ['HTTP/1.1', false],
    ['h2c', true],
  ])("is an undici request's signal (%s): aborting it mid-stream closes the request with its reason, and undici removes its listener", async (_proto, h2c) => {
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
      server = createHttpServer((req, res) => {
        closed.push(once(res, 'close'));
        endless(res);
      });
    }
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const dispatcher: Dispatcher = h2c ? new H2CClient(origin) : new Agent();
    try {
      const abort = new CountingAbort();
      const res = await dispatcher.request({ origin, path: '/', method: 'POST', body: '{}', signal: abort.signal });
      expect(res.statusCode).toBe(200);
      const failed = new Promise<unknown>((resolve) => res.body.once('error', resolve));
      const reason = new Error('task canceled');
      abort.abort(reason);
      expect(await failed).toBe(reason);
      await Promise.all(closed); // the node saw its request go away
      expect(abort.added).toBe(1);
      await new Promise((resolve) => setImmediate(resolve));
      expect(abort.removed).toBe(abort.added);

      // Aborted before the headers: the request rejects with the reason.
      const early = new AttemptAbort();
      const pending = dispatcher.request({ origin, path: '/', method: 'POST', body: '{}', signal: early.signal });
      early.abort(reason);
      await expect(pending).rejects.toBe(reason);
    } finally {
      await dispatcher.destroy();
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
