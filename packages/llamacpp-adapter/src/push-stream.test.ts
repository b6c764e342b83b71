import { afterEach, describe, expect, it } from 'vitest';
import { findFreePort } from '@llama-orch/engine-provisioner';
import {
  CompletionAbortedError,
  EngineProtocolError,
  EngineRejectedError,
  EngineUnreachableError,
  WorkerResetError,
} from './errors.js';
import { LlamaServerClient, type CompletionEvent } from './llama-server-client.js';
import { faultServer } from './testing/fault-server.js';
import { chatEvents, completeEvents } from './testing/pull-events.js';

/**
 * The push form (`completeInto`/`chatInto`, what pool-managerd runs) against the pull form
 * (`complete`/`chat`, which the stream tests cover): same events, same errors, on the same fault
 * fixtures.
 */
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

type Outcome = { events: CompletionEvent[]; error?: unknown };

async function pull(it: AsyncIterable<CompletionEvent>): Promise<Outcome> {
  const events: CompletionEvent[] = [];
  try {
    for await (const ev of it) events.push(ev);
    return { events };
  } catch (error) {
    return { events, error };
  }
}

async function push(run: (onEvent: (ev: CompletionEvent) => void) => Promise<void>): Promise<Outcome> {
  const events: CompletionEvent[] = [];
  try {
    await run((ev) => {
      events.push(ev);
    });
    return { events };
  } catch (error) {
    return { events, error };
  }
}

const sse = (o: unknown): string => `data: ${JSON.stringify(o)}\n\n`;
const final = {
  content: '',
  stop: true,
  tokens_predicted: 3,
  stop_type: 'eos',
  tokens_evaluated: 4,
  timings: { predicted_ms: 1.5, cache_n: 0 },
};
const req = { prompt: 'x', max_tokens: 4 };

const completionBodies: Record<string, string> = {
  'tokens, pings, empty frames, probabilities, end': `${sse({ content: 'a', stop: false, tokens_predicted: 1 })}:\n\n${sse({ content: '', stop: false })}${sse({ content: 'é\n"', stop: false, completion_probabilities: [{ p: 1 }] })}${sse(final)}`,
  'frames split oddly, CRLF': `data: {"content":"a","stop":false}\r\n\r\ndata: {"content":"b",\ndata: "stop":false}\n\n${sse(final)}`,
  'no final frame': sse({ content: 'a', stop: false }),
  'an error frame': `${sse({ content: 'a', stop: false })}${sse({ error: { code: 500, message: 'decode failed', type: 'server_error' } })}`,
  'not JSON': `${sse({ content: 'a', stop: false })}data: {nope\n\n`,
  'unknown shape': `${sse({ content: 'a', stop: false })}${sse({ content: 3, stop: false })}`,
  'a token frame with a bad count': `${sse({ content: 'a', stop: false, tokens_predicted: -1 })}${sse(final)}`,
};

describe('completeInto: the same events and errors as complete', () => {
  for (const [name, body] of Object.entries(completionBodies)) {
    it(name, async () => {
      const client = await server((res) => {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.end(body);
      });
      const a = await pull(completeEvents(client, req));
      const b = await push((on) => client.completeInto(req, on));
      expect(b.events).toEqual(a.events);
      expect(b.error?.constructor).toBe(a.error?.constructor);
      expect((b.error as Error | undefined)?.message).toBe((a.error as Error | undefined)?.message);
    });
  }

  it('error classes: reset, engine error frame, protocol', async () => {
    const client = await server((res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.end(completionBodies['no final frame']);
    });
    expect((await push((on) => client.completeInto(req, on))).error).toBeInstanceOf(WorkerResetError);
    const inside = await server((res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.end(completionBodies['an error frame']);
    });
    expect((await push((on) => inside.completeInto(req, on))).error).toBeInstanceOf(EngineRejectedError);
    const odd = await server((res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.end(completionBodies['unknown shape']);
    });
    expect((await push((on) => odd.completeInto(req, on))).error).toBeInstanceOf(EngineProtocolError);
  });

  it('answers other than 200: the same errors as complete (JSON error, loading, not JSON)', async () => {
    const replies: Array<[number, string]> = [
      [
        400,
        JSON.stringify({
          error: {
            code: 400,
            message: 'request exceeds the available context size',
            type: 'exceed_context_size_error',
          },
        }),
      ],
      [503, JSON.stringify({ error: { code: 503, message: 'Loading model', type: 'unavailable_error' } })],
      [500, 'plain text'],
    ];
    for (const [status, text] of replies) {
      const client = await server((res) => {
        res.writeHead(status, { 'content-type': 'application/json' });
        res.end(text);
      });
      const a = await pull(completeEvents(client, req));
      const b = await push((on) => client.completeInto(req, on));
      expect(b.events).toEqual([]);
      expect(b.error?.constructor).toBe(a.error?.constructor);
      expect(b.error).toMatchObject({ message: (a.error as Error).message });
    }
  });

  it('no listener: ENGINE_UNREACHABLE as complete', async () => {
    const port = await findFreePort();
    const client = new LlamaServerClient({ baseUrl: `http://127.0.0.1:${port}` });
    cleanups.push(() => client.close());
    const a = await pull(completeEvents(client, req));
    const b = await push((on) => client.completeInto(req, on));
    expect(b.error).toBeInstanceOf(EngineUnreachableError);
    expect(b.error?.constructor).toBe(a.error?.constructor);
  });

  it('a signal aborted before the call rejects at once', async () => {
    const client = await server((res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.end(completionBodies['no final frame']);
    });
    expect((await push((on) => client.completeInto(req, on, AbortSignal.abort()))).error).toBeInstanceOf(
      CompletionAbortedError,
    );
  });

  it('a socket destroyed mid-body is WORKER_RESET', async () => {
    const client = await server((res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(sse({ content: 'a', stop: false }));
      setTimeout(() => res.socket?.destroy(), 20);
    });
    const out = await push((on) => client.completeInto(req, on));
    expect(out.events).toEqual([{ type: 'token', t: 'a', i: 0 }]);
    expect(out.error).toBeInstanceOf(WorkerResetError);
  });

  it('abort closes the engine socket and rejects with CompletionAbortedError', async () => {
    let closed!: () => void;
    const socketClosed = new Promise<void>((r) => (closed = r));
    const client = await server((res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(sse({ content: 'a', stop: false }) + sse({ content: 'b', stop: false }));
      res.on('close', () => closed());
    });
    const ac = new AbortController();
    const out = await push((on) =>
      client.completeInto(
        req,
        (ev) => {
          on(ev);
          ac.abort();
        },
        ac.signal,
      ),
    );
    expect(out.error).toBeInstanceOf(CompletionAbortedError);
    expect(out.events).toHaveLength(1);
    await socketClosed;
  });

  it('a promise from onEvent pauses the body until it settles (back-pressure)', async () => {
    const client = await server((res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.end(`${sse({ content: 'a', stop: false })}${sse({ content: 'b', stop: false })}${sse(final)}`);
    });
    const order: string[] = [];
    await client.completeInto(req, async (ev) => {
      order.push(ev.type === 'token' ? ev.t : 'end');
      await new Promise((r) => setTimeout(r, 5));
      order.push('waited');
    });
    // One chunk: its events are handed over together; the wait holds the next read, not them.
    expect(order.filter((o) => o !== 'waited')).toEqual(['a', 'b', 'end']);
  });
});

describe('chatInto: the same events and errors as chat', () => {
  const chunk = (delta: Record<string, unknown>, finish: string | null = null): string =>
    sse({ choices: [{ index: 0, delta, finish_reason: finish }] });
  const usage = sse({
    choices: [],
    usage: { completion_tokens: 2, prompt_tokens: 5, prompt_tokens_details: { cached_tokens: 1 } },
    timings: { predicted_ms: 2 },
  });
  const bodies: Record<string, string> = {
    'role, content, tool call, finish, usage, [DONE]': `${chunk({ role: 'assistant' })}${chunk({ content: 'hi' })}${chunk({ tool_calls: [{ id: 'x' }] })}${chunk({}, 'stop')}${usage}data: [DONE]\n\n`,
    'no [DONE]': `${chunk({ content: 'hi' })}`,
    '[DONE] without usage': `${chunk({ content: 'hi' })}${chunk({}, 'length')}data: [DONE]\n\n`,
  };
  const chatReq = { messages: [{ role: 'user' as const, content: 'x' }], max_tokens: 4 };
  for (const [name, body] of Object.entries(bodies)) {
    it(name, async () => {
      const client = await server((res) => {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.end(body);
      });
      const a = await pull(chatEvents(client, chatReq));
      const b = await push((on) => client.chatInto(chatReq, on));
      expect(b.events).toEqual(a.events);
      expect(b.error?.constructor).toBe(a.error?.constructor);
    });
  }
});
