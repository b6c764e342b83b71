import { createServer, type Server } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { StreamClient } from './stream-client.js';

/** A stand-in for orchestratord's `POST /v2/tasks` with `Accept: text/event-stream`: three tokens, then `end`. */
function inlineServer(
  seen: Array<{ accept: string | undefined; auth: string | undefined; body: Record<string, unknown> }>,
): Server {
  return createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => {
      body += c.toString();
    });
    req.on('end', () => {
      seen.push({
        accept: req.headers.accept,
        auth: req.headers.authorization,
        body: JSON.parse(body) as Record<string, unknown>,
      });
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      for (let i = 0; i < 3; i++) res.write(`event: token\ndata: {"t":"${process.hrtime.bigint()}","i":${i}}\n\n`);
      res.end('event: end\ndata: {"tokens_out":3}\n\n');
    });
  });
}

describe('StreamClient (inline, repeat)', () => {
  let server: Server | undefined;
  afterEach(async () => {
    await new Promise<void>((r) => (server === undefined ? r() : server.close(() => r())));
  });

  it('reads the events from the admission response and replaces each finished task with a new one', async () => {
    const seen: Array<{ accept: string | undefined; auth: string | undefined; body: Record<string, unknown> }> = [];
    server = inlineServer(seen);
    await new Promise<void>((r) => server?.listen(0, '127.0.0.1', r));
    const port = (server.address() as { port: number }).port;
    const client = new StreamClient();
    const opened = await client.open({
      type: 'open',
      orchUrl: `http://127.0.0.1:${port}`,
      token: 'stream-client-token',
      model: 'fixture:m',
      count: 2,
      maxTokens: 3,
      concurrency: 2,
      inline: true,
      repeat: true,
    });
    expect(opened).toMatchObject({ type: 'opened', opened: 2, failed: 0 });
    const deadline = Date.now() + 5000;
    let status = client.status();
    while (status.type === 'status' && status.ended < 10 && Date.now() < deadline) {
      await sleep(10);
      status = client.status();
    }
    await client.close();
    expect(status).toMatchObject({ type: 'status', errored: 0 });
    if (status.type !== 'status') throw new Error('no status');
    expect(status.ended).toBeGreaterThanOrEqual(10);
    expect(status.tokens).toBeGreaterThanOrEqual(status.ended * 3);
    expect(seen.length).toBeGreaterThanOrEqual(10);
    expect(new Set(seen.map((s) => s.body.task_id)).size).toBe(seen.length);
    expect(
      seen.every(
        (s) => s.accept === 'text/event-stream' && s.auth === 'Bearer stream-client-token' && s.body.max_tokens === 3,
      ),
    ).toBe(true);
  });
});
