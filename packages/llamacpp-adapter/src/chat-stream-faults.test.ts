import { afterEach, describe, expect, it } from 'vitest';
import { EngineProtocolError, EngineRejectedError, WorkerResetError } from './errors.js';
import { LlamaServerClient, type CompletionEvent } from './llama-server-client.js';
import { faultServer } from './testing/fault-server.js';
import { chatEvents } from './testing/pull-events.js';

// Chat stream shapes the real engine cannot be made to send on demand (tool-call deltas from a
// model without tools, cut bodies, error frames), scripted byte for byte after reference §4.4/§4.9.
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0)) await c();
});

async function server(body: string, status = 200): Promise<LlamaServerClient> {
  const s = await faultServer((res) => {
    res.writeHead(status, { 'content-type': status === 200 ? 'text/event-stream' : 'application/json' });
    res.end(body);
  });
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

const req = { messages: [{ role: 'user' as const, content: 'hi' }], max_tokens: 4 };
const chunk = (choice: object | undefined, extra: object = {}): string =>
  `data: ${JSON.stringify({ choices: choice === undefined ? [] : [{ index: 0, finish_reason: null, ...choice }], object: 'chat.completion.chunk', ...extra })}\n\n`;
const usage = (completion: number, prompt: number, cached: number): string =>
  chunk(undefined, {
    usage: {
      completion_tokens: completion,
      prompt_tokens: prompt,
      total_tokens: completion + prompt,
      prompt_tokens_details: { cached_tokens: cached },
    },
    timings: { cache_n: cached, predicted_ms: 2.5 },
  });

describe('chat stream mapping (fault fixtures)', () => {
  it('role chunk makes no event; content, tool-call deltas and logprobs become tokens; [DONE] ends with usage', async () => {
    const toolCall = [{ index: 0, id: 'c1', type: 'function', function: { name: 'f', arguments: '{}' } }];
    const logprobs = { content: [{ id: 5, token: 'b', logprob: -1 }] };
    const client = await server(
      [
        chunk({ delta: { role: 'assistant', content: null } }),
        chunk({ delta: { content: 'a' } }),
        ':\n\n',
        chunk({ delta: { content: 'b' }, logprobs }),
        chunk({ delta: { tool_calls: toolCall } }),
        chunk({ delta: {}, finish_reason: 'tool_calls' }),
        usage(3, 12, 8),
        'data: [DONE]\n\n',
      ].join(''),
    );
    expect(await collect(chatEvents(client, req))).toEqual([
      { type: 'token', t: 'a', i: 0 },
      { type: 'token', t: 'b', i: 1, logprobs },
      { type: 'token', t: '', i: 2, delta: { tool_calls: toolCall } },
      {
        type: 'end',
        tokens_out: 3,
        decode_ms: 2.5,
        prompt_tokens: 12,
        cached_tokens: 8,
        stop_type: 'eos',
        finish_reason: 'tool_calls',
      },
    ]);
  });

  it('finish_reason length is stop_type limit', async () => {
    const client = await server(
      `${chunk({ delta: { content: 'x' } })}${chunk({ delta: {}, finish_reason: 'length' })}${usage(1, 3, 0)}data: [DONE]\n\n`,
    );
    expect((await collect(chatEvents(client, req))).at(-1)).toMatchObject({
      type: 'end',
      stop_type: 'limit',
      finish_reason: 'length',
      cached_tokens: 0,
    });
  });

  it('a body that ends before [DONE] is WORKER_RESET, even after the usage chunk', async () => {
    const client = await server(
      `${chunk({ delta: { content: 'x' } })}${chunk({ delta: {}, finish_reason: 'stop' })}${usage(1, 3, 0)}`,
    );
    const seen: CompletionEvent[] = [];
    const err = await (async () => {
      for await (const ev of chatEvents(client, req)) seen.push(ev);
    })().catch((e: unknown) => e);
    expect(seen).toEqual([{ type: 'token', t: 'x', i: 0 }]);
    expect(err).toBeInstanceOf(WorkerResetError);
  });

  it('[DONE] without a usage chunk is a protocol error', async () => {
    const client = await server(
      `${chunk({ delta: { content: 'x' } })}${chunk({ delta: {}, finish_reason: 'stop' })}data: [DONE]\n\n`,
    );
    await expect(collect(chatEvents(client, req))).rejects.toBeInstanceOf(EngineProtocolError);
  });

  it('a 400 before the stream is INVALID_PARAMS with the engine message; an error frame inside it too', async () => {
    const before = await server(
      JSON.stringify({
        error: { code: 400, message: 'Failed to initialize samplers: std::exception', type: 'invalid_request_error' },
      }),
      400,
    );
    const e1 = await collect(chatEvents(before, req)).catch((e: unknown) => e);
    expect(e1).toBeInstanceOf(EngineRejectedError);
    expect(e1).toMatchObject({
      status: 400,
      errorCode: 'INVALID_PARAMS',
      retriable: false,
      message: 'Failed to initialize samplers: std::exception',
    });
    const inside = await server(
      `${chunk({ delta: { content: 'x' } })}data: ${JSON.stringify({ error: { code: 500, message: 'decode failed', type: 'server_error' } })}\n\n`,
    );
    await expect(collect(chatEvents(inside, req))).rejects.toMatchObject({ status: 500, message: 'decode failed' });
  });
});
