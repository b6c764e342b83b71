import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EngineRejectedError } from './errors.js';
import { LlamaServerClient, type RequestHeaders } from './llama-server-client.js';

// A caller's extra headers (a W3C traceparent) go with every kind of engine request, and never
// replace the client's own. The engine here records the headers and refuses the request (400): only
// what was sent matters.
const seen: Array<{ path: string | undefined; headers: IncomingHttpHeaders }> = [];
const server = createServer((req, res) => {
  seen.push({ path: req.url, headers: req.headers });
  req.resume();
  req.on('end', () => {
    res.writeHead(400, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ error: { code: 400, message: 'recorded', type: 'invalid_request_error' } }));
  });
});
let client: LlamaServerClient;

beforeAll(async () => {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  client = new LlamaServerClient({
    baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    apiKey: 'engine-key',
  });
});
afterAll(async () => {
  await client.close();
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

const TRACEPARENT = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
const extra: RequestHeaders = { traceparent: TRACEPARENT, authorization: 'Bearer nope', 'content-type': 'text/plain' };
const noEvents = () => undefined;

describe('extra request headers', () => {
  it.each([
    [
      '/completion',
      (h?: RequestHeaders) => client.completeInto({ prompt: 'x', max_tokens: 1 }, noEvents, undefined, h),
    ],
    [
      '/v1/chat/completions',
      (h?: RequestHeaders) =>
        client.chatInto({ messages: [{ role: 'user', content: 'x' }], max_tokens: 1 }, noEvents, undefined, h),
    ],
    [
      '/infill',
      (h?: RequestHeaders) => client.infillInto({ input_prefix: 'a', input_suffix: 'b' }, noEvents, undefined, h),
    ],
    [
      '/v1/completions',
      (h?: RequestHeaders) => client.answer({ workload: 'completion', prompt: 'x', max_tokens: 1 }, undefined, h),
    ],
    [
      '/v1/embeddings',
      (h?: RequestHeaders) => client.call({ kind: 'embeddings', body: { input: ['x'] } }, undefined, h),
    ],
  ])('%s carries them; the client keeps its content type and auth', async (path, send) => {
    seen.length = 0;
    await expect(send(extra)).rejects.toThrow(EngineRejectedError);
    await expect(send()).rejects.toThrow(EngineRejectedError);
    expect(seen.map((s) => s.path)).toEqual([path, path]);
    const [withExtra, without] = seen.map((s) => s.headers);
    expect(withExtra).toMatchObject({
      traceparent: TRACEPARENT,
      authorization: 'Bearer engine-key',
      'content-type': 'application/json',
    });
    expect(without?.traceparent).toBeUndefined();
    expect(without?.authorization).toBe('Bearer engine-key');
  });
});
