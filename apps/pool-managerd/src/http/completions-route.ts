import { once } from 'node:events';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { DispatchRequestSchema, PoolIdSchema } from '@llama-orch/contracts';
import { dispatchEvents } from '../dispatch.js';
import { PoolUnreadyError } from '../errors.js';
import { UNREADY_RETRY_MS } from '../registry.js';
import type { PoolManager } from '../pool-manager.js';

const PoolParams = z.strictObject({ id: PoolIdSchema });

/**
 * `POST /v2/pools/{id}/completions`: takes a lease (404 unknown pool, 503 POOL_UNREADY when not
 * ready or draining, 503 REPLICA_EXHAUSTED when every slot is leased), then streams DispatchEvents
 * as NDJSON. Client disconnect aborts the engine request, which frees the engine's slot.
 */
export const completionsRoute: FastifyPluginAsyncZod<{ manager: PoolManager }> = async (app, { manager }) => {
  app.post('/v2/pools/:id/completions', { schema: { params: PoolParams, body: DispatchRequestSchema } }, async (request, reply) => {
    const { id } = request.params;
    const lease = manager.registry.lease(id);
    const engine = manager.registry.engine(id);
    if (engine === undefined) {
      // Unbound between the lease check and here (the engine just exited): give the slot back.
      lease.release();
      throw new PoolUnreadyError(id, 'its engine just exited', UNREADY_RETRY_MS);
    }
    const clientGone = new AbortController();
    reply.raw.on('close', () => {
      // HTTP/1.1: closed before the response finished. HTTP/2 (the h2c listener): the stream was
      // reset, which marks the request aborted even though the response counts as finished.
      if (!reply.raw.writableFinished || (request.raw as { aborted?: boolean }).aborted === true) clientGone.abort();
    });
    const events = dispatchEvents({
      poolId: id,
      nodeId: manager.nodeId,
      request: request.body,
      lease,
      client: manager.clientFor(engine.url),
      engineVersion: engine.engine_version,
      registry: manager.registry,
      metrics: manager.metrics,
      logger: request.log,
      clientGone: clientGone.signal,
    });
    // Written straight to the response (hijacked), one line per event: a Readable over an async
    // generator, piped by Fastify, cost several promise and stream hops per token.
    reply.hijack();
    const res = reply.raw;
    res.writeHead(200, {
      'x-correlation-id': request.id, 'content-type': 'application/x-ndjson; charset=utf-8', 'cache-control': 'no-store',
    });
    // Accepted: orchestratord waits only so long for these headers (a silent node is frozen), and
    // HTTP/1.1 would hold them back until the first token, after the engine's prompt processing.
    // HTTP/2 sends them with writeHead.
    if (request.raw.httpVersionMajor === 1) res.flushHeaders();
    try {
      for await (const ev of events) {
        if (!res.write(`${JSON.stringify(ev)}\n`)) await once(res, 'drain', { signal: clientGone.signal });
      }
    } catch (err) {
      // Only the drain wait throws: the client left while the response was backed up.
      if (!clientGone.signal.aborted) throw err;
    } finally {
      if (!res.destroyed) res.end();
    }
  });
};
