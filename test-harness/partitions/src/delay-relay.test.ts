import { once } from 'node:events';
import { connect, createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDelayRelay, type DelayRelay } from './delay-relay.js';

const DELAY = 200;
/** Timers fire on whole milliseconds: a chunk may be written up to 1 ms before a precise `DELAY`. */
const SLACK = 2;

/** Everything a socket received, with when each chunk arrived, and how it ended. */
function record(s: Socket): {
  chunks: { at: number; text: string }[];
  ended: Promise<number>;
  closed: Promise<{ at: number; err: string | undefined }>;
} {
  const chunks: { at: number; text: string }[] = [];
  let err: string | undefined;
  s.on('data', (b: Buffer) => chunks.push({ at: Date.now(), text: b.toString() }));
  s.on('error', (e: NodeJS.ErrnoException) => (err = e.code ?? e.message));
  // not events.once: it rejects on 'error', and a reset is what some tests wait for
  const ended = new Promise<number>((resolve) => s.once('end', () => resolve(Date.now())));
  const closed = new Promise<{ at: number; err: string | undefined }>((resolve) =>
    s.once('close', () => resolve({ at: Date.now(), err })),
  );
  return { chunks, ended, closed };
}

describe('the delay relay fixture (TCP, a fixed delay each way)', () => {
  let upstream: Server;
  const accepted: Socket[] = [];
  let relay: DelayRelay;

  /** A connection through the relay: the client's socket and the upstream server's. */
  const dial = async (): Promise<{ client: Socket; far: Socket }> => {
    // counted before connecting: the far side may be accepted before 'connect' reaches the client
    const n = accepted.length;
    const client = connect({ host: '127.0.0.1', port: relay.ports[0] as number, allowHalfOpen: true });
    await once(client, 'connect');
    while (accepted.length === n) await new Promise((r) => setTimeout(r, 5));
    return { client, far: accepted[n] as Socket };
  };

  beforeAll(async () => {
    upstream = createServer({ allowHalfOpen: true }, (s) => accepted.push(s));
    upstream.listen(0, '127.0.0.1');
    await once(upstream, 'listening');
    relay = await startDelayRelay({
      maps: [{ listen: '127.0.0.1:0', upstream: `127.0.0.1:${(upstream.address() as AddressInfo).port}` }],
      delayMs: DELAY,
    });
  });

  afterAll(async () => {
    await relay?.stop();
    for (const s of accepted) s.destroy();
    upstream?.close();
  });

  it('delivers each chunk after the delay, both ways, in order', async () => {
    const { client, far } = await dial();
    const atFar = record(far);
    const atClient = record(client);
    const sent: number[] = [];
    for (const text of ['one ', 'two ', 'three']) {
      sent.push(Date.now());
      client.write(text);
      await new Promise((r) => setTimeout(r, 30));
    }
    while (atFar.chunks.map((c) => c.text).join('').length < 'one two three'.length)
      await new Promise((r) => setTimeout(r, 5));
    expect(atFar.chunks.map((c) => c.text).join('')).toBe('one two three');
    // each chunk arrived on its own, one delay after it was written
    expect(atFar.chunks.length).toBe(3);
    atFar.chunks.forEach((c, i) => expect(c.at - (sent[i] as number)).toBeGreaterThanOrEqual(DELAY - SLACK));
    const back = Date.now();
    far.write('reply');
    while (atClient.chunks.length === 0) await new Promise((r) => setTimeout(r, 5));
    expect(atClient.chunks[0]?.text).toBe('reply');
    expect((atClient.chunks[0]?.at as number) - back).toBeGreaterThanOrEqual(DELAY - SLACK);
    client.destroy();
  });

  it('passes a FIN on after the delay and keeps the other direction open (half-close)', async () => {
    const { client, far } = await dial();
    const atFar = record(far);
    const atClient = record(client);
    const finAt = Date.now();
    client.end('last words');
    expect((await atFar.ended) - finAt).toBeGreaterThanOrEqual(DELAY - SLACK);
    expect(atFar.chunks.map((c) => c.text).join('')).toBe('last words');
    // the half-closed client still reads what the far side sends, then the far side's FIN
    const closedAt = Date.now();
    far.end('goodbye');
    expect((await atClient.ended) - closedAt).toBeGreaterThanOrEqual(DELAY - SLACK);
    expect(atClient.chunks.map((c) => c.text).join('')).toBe('goodbye');
    expect((await atClient.closed).err).toBeUndefined();
  });

  it('passes a reset on as a reset, after the delay', async () => {
    const { client, far } = await dial();
    const atClient = record(client);
    const resetAt = Date.now();
    far.resetAndDestroy();
    const closed = await atClient.closed;
    expect(closed.err).toBe('ECONNRESET');
    expect(closed.at - resetAt).toBeGreaterThanOrEqual(DELAY - SLACK);
  });

  it('resets the client when the upstream refuses, after the delay', async () => {
    const closed = createServer();
    closed.listen(0, '127.0.0.1');
    await once(closed, 'listening');
    const refusedPort = (closed.address() as AddressInfo).port;
    closed.close();
    const refusing = await startDelayRelay({
      maps: [{ listen: '127.0.0.1:0', upstream: `127.0.0.1:${refusedPort}` }],
      delayMs: DELAY,
    });
    try {
      const dialedAt = Date.now();
      const client = connect({ host: '127.0.0.1', port: refusing.ports[0] as number });
      const atClient = record(client);
      const end = await atClient.closed;
      expect(end.err).toBe('ECONNRESET');
      expect(end.at - dialedAt).toBeGreaterThanOrEqual(DELAY - SLACK);
    } finally {
      await refusing.stop();
    }
  });

  it('changes its delay at run time', async () => {
    const roundTrip = async (): Promise<number> => {
      const { client, far } = await dial();
      far.on('data', (b: Buffer) => far.write(b));
      const start = Date.now();
      client.write('ping');
      await once(client, 'data');
      client.destroy();
      return Date.now() - start;
    };
    await relay.setDelay(0);
    const fast = await roundTrip();
    await relay.setDelay(DELAY);
    const slow = await roundTrip();
    expect(fast).toBeLessThan(DELAY / 2);
    expect(slow).toBeGreaterThanOrEqual(2 * DELAY - SLACK);
    expect(relay.delayMs).toBe(DELAY);
  });
});
