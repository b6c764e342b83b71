import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { ApiClient, ApiError, UnauthorizedError } from './api.js';
import { streamChat, StreamCutError } from './chat-stream.js';
import { KeyStore } from './key-store.js';

// A loopback server plays /v1/chat/completions so the client's handling of each way a stream can
// go (finished, refused, failed mid-way, cut, stopped) is checked on real HTTP.
let server: Server | undefined;
afterEach(async () => {
  const s = server;
  server = undefined;
  if (s)
    await new Promise((r) => {
      s.closeAllConnections();
      s.close(r);
    });
});

async function serve(handler: (req: IncomingMessage, body: unknown, res: ServerResponse) => void): Promise<ApiClient> {
  server = createServer((req, res) => {
    let raw = '';
    req.on('data', (c: Buffer) => {
      raw += c.toString();
    });
    req.on('end', () => handler(req, JSON.parse(raw || 'null'), res));
  });
  await new Promise<void>((r) => server!.listen(0, '127.0.0.1', r));
  const keys = new KeyStore(undefined);
  keys.set('sk-test');
  return new ApiClient({ keys, baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}` });
}

const chunk = (content: string | undefined, finish: string | null = null): string =>
  `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta: content === undefined ? {} : { content }, finish_reason: finish }] })}\n\n`;
const usage = (n: number): string =>
  `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [], usage: { prompt_tokens: 3, completion_tokens: n, total_tokens: 3 + n } })}\n\n`;
const sse = (res: ServerResponse): void => {
  res.writeHead(200, { 'content-type': 'text/event-stream' });
  res.flushHeaders();
};

describe('streamChat', () => {
  it('sends one user message with stream + usage and delivers pieces as they come', async () => {
    let seen: { req: IncomingMessage; body: unknown } | undefined;
    const api = await serve((req, body, res) => {
      seen = { req, body };
      sse(res);
      res.write(chunk(''));
      res.write(chunk('Hello'));
      setTimeout(() => {
        res.write(chunk(', night'));
        res.write(chunk(undefined, 'length'));
        res.end(`${usage(2)}data: [DONE]\n\n`);
      }, 20);
    });
    const pieces: string[] = [];
    const result = await streamChat(api, { model: 'synthetic', prompt: 'Say hi', max_tokens: 8 }, (p) =>
      pieces.push(p),
    );
    expect(pieces).toEqual(['Hello', ', night']);
    expect(result).toEqual({ text: 'Hello, night', finish_reason: 'length', completion_tokens: 2 });
    expect(seen!.req.url).toBe('/v1/chat/completions');
    expect(seen!.req.headers.authorization).toBe('Bearer sk-test');
    expect(seen!.body).toEqual({
      model: 'synthetic',
      messages: [{ role: 'user', content: 'Say hi' }],
      max_tokens: 8,
      stream: true,
      stream_options: { include_usage: true },
    });
  });

  it('a refused request rejects with its OpenAI-shaped error', async () => {
    const api = await serve((_req, _body, res) =>
      res.writeHead(503, { 'content-type': 'application/json' }).end(
        JSON.stringify({
          error: {
            message: 'no pool serves model nope',
            type: 'server_error',
            param: null,
            code: 'MODEL_NOT_AVAILABLE',
          },
        }),
      ),
    );
    const err = await streamChat(api, { model: 'nope', prompt: 'x', max_tokens: 1 }, () => undefined).catch(
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ApiError);
    expect(err).toMatchObject({ status: 503, code: 'MODEL_NOT_AVAILABLE', message: 'no pool serves model nope' });
  });

  it('a 401 is an UnauthorizedError (the page then asks for a key)', async () => {
    const api = await serve((_req, _body, res) =>
      res
        .writeHead(401, { 'content-type': 'application/json' })
        .end(JSON.stringify({ error: { message: 'bad key', code: 'UNAUTHORIZED' } })),
    );
    let told = 0;
    api.onUnauthorized(() => {
      told++;
    });
    await expect(streamChat(api, { model: 'm', prompt: 'x', max_tokens: 1 }, () => undefined)).rejects.toBeInstanceOf(
      UnauthorizedError,
    );
    expect(told).toBe(1);
  });

  it('an error frame mid-stream rejects, keeping the text so far', async () => {
    const api = await serve((_req, _body, res) => {
      sse(res);
      res.end(
        `${chunk('partial')}data: ${JSON.stringify({ error: { message: 'engine crashed', type: 'server_error', code: 'WORKER_RESET' } })}\n\n`,
      );
    });
    const pieces: string[] = [];
    await expect(
      streamChat(api, { model: 'm', prompt: 'x', max_tokens: 4 }, (p) => pieces.push(p)),
    ).rejects.toMatchObject({ code: 'WORKER_RESET', message: 'engine crashed' });
    expect(pieces).toEqual(['partial']);
  });

  it('a stream that ends without [DONE] is cut, not finished', async () => {
    const api = await serve((_req, _body, res) => {
      sse(res);
      res.end(chunk('half'));
    });
    await expect(streamChat(api, { model: 'm', prompt: 'x', max_tokens: 4 }, () => undefined)).rejects.toBeInstanceOf(
      StreamCutError,
    );
  });

  it('aborting (Stop) ends the read and closes the request', async () => {
    let closed!: () => void;
    const requestClosed = new Promise<void>((r) => {
      closed = r;
    });
    const api = await serve((_req, _body, res) => {
      sse(res);
      res.write(chunk('first'));
      res.on('close', closed);
    });
    const ctl = new AbortController();
    const done = streamChat(
      api,
      { model: 'm', prompt: 'x', max_tokens: 99 },
      () => ctl.abort(new Error('stopped by the user')),
      ctl.signal,
    );
    await expect(done).rejects.toThrow('stopped by the user');
    await requestClosed;
  });
});
