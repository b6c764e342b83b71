import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { CORRELATION_ID_HEADER, DispatchRequestSchema, PoolIdSchema } from '@llama-orch/contracts';
import type { PoolManager } from '../pools/pool-manager.js';
import { NdjsonEventWriter } from './ndjson-writer.js';

const PoolParams = z.strictObject({ id: PoolIdSchema });

/**
 * `POST /v2/pools/{id}/completions`: opens a completion on the pool (404 unknown pool, 503
 * POOL_UNREADY when not ready or draining, 503 REPLICA_EXHAUSTED when every slot is leased), then
 * streams DispatchEvents as NDJSON — or, for `stream: false`, writes one `result` (or `error`) line. Client disconnect aborts the engine request, which frees the
 * engine's slot. Every line about the dispatch carries the request's `correlation_id`.
 */
export const completionsRoute: FastifyPluginAsyncZod<{ manager: PoolManager }> = async (app, { manager }) => {
  app.post('/v2/pools/:id/completions', { schema: { params: PoolParams, body: DispatchRequestSchema } }, async (request, reply) => {
    const clientGone = new AbortController();
    const options = { signal: clientGone.signal, log: request.log };
    // `stream: false`: one answer from the engine, one `result` line (pools/answer-dispatch.ts).
    const answer = request.body.stream === false ? manager.openAnswer(request.params.id, request.body, options) : undefined;
    const run = answer === undefined ? manager.openCompletion(request.params.id, request.body, options) : undefined;
    reply.raw.on('close', () => {
      // HTTP/1.1: closed before the response finished. HTTP/2 (the h2c listener): the stream was
      // reset, which marks the request aborted even though the response counts as finished.
      if (!reply.raw.writableFinished || (request.raw as { aborted?: boolean }).aborted === true) clientGone.abort();
    });
    // Written straight to the response (hijacked), the lines of one engine read in one write, with
    // no stream or promise hop in between (performance notes: hijacked NDJSON writes, coalesced
    // NDJSON writes).
    reply.hijack();
    const res = reply.raw;
    res.writeHead(200, {
      [CORRELATION_ID_HEADER]: request.id,
      'content-type': 'application/x-ndjson; charset=utf-8',
      'cache-control': 'no-store',
    });
    // Accepted: orchestratord waits only so long for these headers (a silent node is frozen), and
    // HTTP/1.1 would hold them back until the first token, after the engine's prompt processing.
    // HTTP/2 sends them with writeHead.
    if (request.raw.httpVersionMajor === 1) res.flushHeaders();
    if (answer !== undefined) {
      let sent = false;
      await answer((line) => {
        sent = true;
        if (!res.destroyed) res.end(line);
      });
      if (!sent && !res.destroyed) res.end();
      return;
    }
    const writer = new NdjsonEventWriter(res);
    try {
      await (run as NonNullable<typeof run>)(writer.event);
    } finally {
      writer.end();
    }
  });
};
