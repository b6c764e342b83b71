import { createServer, type AddressInfo, type Socket } from 'node:net';
import { PassThrough, Readable } from 'node:stream';
import type { DispatchEvent } from '@llama-orch/contracts';
import { Agent } from 'undici';
import { describe, expect, it } from 'vitest';
import { readDispatchEvents } from './dispatch-events.js';
import { AttemptAbort } from './attempt-abort.js';
import { dispatchBody, PoolClient } from './pool-client.js';
import { UpstreamConnectError, UpstreamStreamError } from './upstream-errors.js';

async function collect(chunks: (string | Buffer)[]): Promise<DispatchEvent[]> {
  const out: DispatchEvent[] = [];
  await readDispatchEvents(Readable.from(chunks, { objectMode: false }), (ev) => {
    out.push(ev);
    return true;
  });
  return out;
}

describe('readDispatchEvents', () => {
  it('parses lines split across chunks, a UTF-8 character split across chunks, and a last line without newline', async () => {
    const euro = Buffer.from('{"type":"token","t":"€","i":1}\n');
    const evs = await collect([
      '{"type":"token","t":"a",',
      '"i":0}\n\n',
      euro.subarray(0, 22),
      euro.subarray(22),
      '{"type":"end","tokens_out":2,"decode_ms":1,"stop_type":"limit","engine_version":"x","pool_id":"p","node_id":"n"}',
    ]);
    expect(evs.map((e) => (e.type === 'token' ? e.t : e.type))).toEqual(['a', '€', 'end']);
  });

  it('rejects a line that is not JSON or not a DispatchEvent, and destroys the body', async () => {
    const body = Readable.from(['{"type":"token","t":"a","i":0}\n', 'not json\n', '{"type":"token","t":"b","i":1}\n'], {
      objectMode: false,
    });
    await expect(readDispatchEvents(body, () => true)).rejects.toBeInstanceOf(UpstreamStreamError);
    expect(body.destroyed).toBe(true);
    await expect(collect(['{"type":"token","t":5}\n'])).rejects.toThrow(/invalid dispatch event/);
  });

  it('stops when the callback says so, and reports a body that closes before its end', async () => {
    const body = new PassThrough();
    const seen: string[] = [];
    const done = readDispatchEvents(body, (ev) => {
      seen.push(ev.type);
      return false;
    });
    body.write('{"type":"token","t":"a","i":0}\n{"type":"token","t":"b","i":1}\n');
    await done;
    expect(seen).toEqual(['token']);
    expect(body.destroyed).toBe(true);
    const cut = new PassThrough();
    const broken = readDispatchEvents(cut, () => true);
    cut.write('{"type":"token","t":"a","i":0}\n');
    cut.destroy();
    await expect(broken).rejects.toThrow(/closed before its end/);
  });
});

describe('PoolClient.dispatch accept timeout', () => {
  it("a node that takes the request and never answers: UpstreamConnectError when the timeout is up, not at undici's next coarse tick", async () => {
    // A frozen node: the kernel accepts the connection and the request bytes, nothing answers.
    const sockets: Socket[] = [];
    const server = createServer((s) => sockets.push(s));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const agent = new Agent();
    const client = new PoolClient({ dispatcher: agent, acceptTimeoutMs: 1000 });
    const body = {
      task_id: 't1',
      workload: 'completion' as const,
      prompt: 'p',
      max_tokens: 1,
      greedy: true,
      cache_prompt: false,
    };
    try {
      const t0 = performance.now();
      const controller = new AttemptAbort();
      const err = await client.dispatch({ url }, 'p', body, controller).catch((e: unknown) => e);
      const ms = performance.now() - t0;
      expect(err).toBeInstanceOf(UpstreamConnectError);
      expect((err as Error).message).toMatch(/did not accept the dispatch within 1000 ms/);
      // Our timer, not undici's headersTimeout (off for dispatches; it ran on 500 ms ticks): the message
      // above is ours. Never early; the upper bound only says "about 1 s", with headroom for a
      // loaded machine (timings belong in `pnpm bench`).
      expect(ms).toBeGreaterThanOrEqual(995);
      expect(ms).toBeLessThan(3000);
      // The deadline stopped the request by aborting the dispatch's controller, with the failure as its reason.
      expect(controller.reason).toBe(err);
      expect(client.http1InFlight(url)).toBe(0);
      // The caller's abort is not a timeout: it rejects with the caller's reason.
      const ac = new AttemptAbort();
      const pending = client.dispatch({ url }, 'p', body, ac).catch((e: unknown) => e);
      ac.abort(new Error('task canceled'));
      expect(((await pending) as Error).message).toBe('task canceled');
      expect(client.http1InFlight(url)).toBe(0);
    } finally {
      for (const s of sockets) s.destroy();
      server.close();
      await agent.close();
    }
  });
});

describe('dispatchBody', () => {
  it('is the request as JSON in a Buffer of its own (not a slice of the shared pool, which a long stream would keep whole)', () => {
    const request = {
      task_id: 't1',
      workload: 'completion' as const,
      prompt: 'p €',
      max_tokens: 1,
      greedy: true,
      cache_prompt: false,
    };
    const buf = dispatchBody(request);
    expect(JSON.parse(buf.toString('utf8'))).toEqual(request);
    expect(buf.byteOffset).toBe(0);
    expect(buf.buffer.byteLength).toBe(buf.byteLength);
  });
});
