import { afterEach, describe, expect, it } from 'vitest';
import { EngineRejectedError, EngineUnreachableError, WorkerResetError } from './errors.js';
import { LlamaServerClient, type CompletionEvent } from './llama-server-client.js';
import { faultServer } from './testing/fault-server.js';
import { findFreePort } from '@llama-orch/engine-provisioner';
import { completeEvents } from './testing/pull-events.js';

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0)) await c();
});

async function server(handler: Parameters<typeof faultServer>[0]): Promise<LlamaServerClient> {
  const s = await faultServer(handler);
  const client = new LlamaServerClient({ baseUrl: s.url });
  cleanups.push(async () => {
    await client.close();
    await s.close();
  });
  return client;
}

async function collect(it: AsyncIterable<CompletionEvent>): Promise<CompletionEvent[]> {
  const out: CompletionEvent[] = [];
  for await (const ev of it) out.push(ev);
  return out;
}

const req = { prompt: 'x', max_tokens: 4 };
const sse = (o: unknown): string => `data: ${JSON.stringify(o)}\n\n`;
const final = {
  content: '',
  stop: true,
  tokens_predicted: 3,
  stop_type: 'none',
  timings: { predicted_ms: 1.5 },
  id_slot: 0,
};

describe('completion stream mapping (fault fixtures)', () => {
  it('skips empty-content frames and pings; maps stop_type none to limit', async () => {
    const client = await server((res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.end(
        `${sse({ content: 'a', stop: false })}:\n\n${sse({ content: '', stop: false })}${sse({ content: 'b', stop: false })}${sse(final)}`,
      );
    });
    expect(await collect(completeEvents(client, req))).toEqual([
      { type: 'token', t: 'a', i: 0 },
      { type: 'token', t: 'b', i: 1 },
      { type: 'end', tokens_out: 3, decode_ms: 1.5, stop_type: 'limit', finish_reason: 'length' },
    ]);
  });

  it('a body that ends without stop:true is WORKER_RESET, after the tokens it had', async () => {
    const client = await server((res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.end(sse({ content: 'a', stop: false }));
    });
    const seen: CompletionEvent[] = [];
    const err = await (async () => {
      for await (const ev of completeEvents(client, req)) seen.push(ev);
    })().catch((e: unknown) => e);
    expect(seen).toEqual([{ type: 'token', t: 'a', i: 0 }]);
    expect(err).toBeInstanceOf(WorkerResetError);
    expect((err as WorkerResetError).errorCode).toBe('WORKER_RESET');
  });

  it('a socket destroyed mid-body is WORKER_RESET', async () => {
    const client = await server((res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(sse({ content: 'a', stop: false }));
      setTimeout(() => res.socket?.destroy(), 20);
    });
    await expect(collect(completeEvents(client, req))).rejects.toBeInstanceOf(WorkerResetError);
  });

  it('JSON errors before the stream and error frames inside it carry the engine message', async () => {
    const before = await server((res) => {
      res.writeHead(400, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          error: {
            code: 400,
            message: 'request (402 tokens) exceeds the available context size',
            type: 'exceed_context_size_error',
          },
        }),
      );
    });
    const e1 = await collect(completeEvents(before, req)).catch((e: unknown) => e);
    expect(e1).toBeInstanceOf(EngineRejectedError);
    expect(e1).toMatchObject({
      status: 400,
      errorCode: 'INVALID_PARAMS',
      engineType: 'exceed_context_size_error',
      message: 'request (402 tokens) exceeds the available context size',
    });
    const inside = await server((res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.end(
        `${sse({ content: 'a', stop: false })}${sse({ error: { code: 500, message: 'decode failed', type: 'server_error' } })}`,
      );
    });
    const e2 = await collect(completeEvents(inside, req)).catch((e: unknown) => e);
    expect(e2).toBeInstanceOf(EngineRejectedError);
    expect(e2).toMatchObject({ status: 500, message: 'decode failed' });
  });

  it('no listener: complete is ENGINE_UNREACHABLE and health is down', async () => {
    const port = await findFreePort();
    const client = new LlamaServerClient({ baseUrl: `http://127.0.0.1:${port}` });
    cleanups.push(() => client.close());
    await expect(collect(completeEvents(client, req))).rejects.toBeInstanceOf(EngineUnreachableError);
    expect(await client.health()).toBe('down');
  });
});
