import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { DispatchRequestSchema, PoolIdSchema, type DispatchRequest } from '@llama-orch/contracts';
import type { Tracing } from '@llama-orch/daemon-support/tracing';
import { PoolManagerError } from '../errors.js';
import { DispatchTrace } from '../pools/dispatch-trace.js';
import type { PoolManager } from '../pools/pool-manager.js';
import { heldSink, startNdjson } from './held-sink.js';
import { NdjsonEventWriter } from './ndjson-writer.js';

const PoolParams = z.strictObject({ id: PoolIdSchema });

const ROUTE = '/v2/pools/:id/completions';

/**
 * `POST /v2/pools/{id}/completions`: opens a completion on the pool (404 unknown pool, 503
 * POOL_UNREADY when not ready or draining, 503 REPLICA_EXHAUSTED when every slot is leased), then
 * streams DispatchEvents as NDJSON — or, for `stream: false`, writes one `result` (or `error`) line. Client disconnect aborts the engine request, which frees the
 * engine's slot — unless the streamed dispatch is re-attachable (`reattach_ms`): then it keeps
 * generating for that long (dispatches-route.ts). Every line about the dispatch carries the request's `correlation_id`.
 *
 * With tracing on, the dispatch is a `dispatch` span (a child of the request's `traceparent`) with an
 * `engine request` span under it (pools/dispatch-trace.ts), and every line of the request from here
 * on carries their `trace_id` and `span_id`. A refusal (404, 503) ends the span with its code.
 */
export const completionsRoute: FastifyPluginAsyncZod<{ manager: PoolManager; tracing: Tracing }> = async (
  app,
  { manager, tracing },
) => {
  app.post(ROUTE, { schema: { params: PoolParams, body: DispatchRequestSchema } }, async (request, reply) => {
    const trace = DispatchTrace.start(tracing, request.headers, {
      taskId: request.body.task_id,
      poolId: request.params.id,
      nodeId: manager.nodeId,
      route: ROUTE,
      workload: request.body.call?.kind ?? request.body.workload,
      stream: request.body.stream !== false,
    });
    // The dispatch's lines, the error handler's and the access line all go through request.log.
    if (trace !== undefined) request.log = reply.log = request.log.child(trace.fields);
    try {
      await dispatch(manager, request, reply, request.params.id, request.body, trace);
    } catch (err) {
      trace?.failed(
        err instanceof PoolManagerError
          ? { code: err.errorCode, message: err.message }
          : { code: 'INTERNAL', message: (err as Error).message },
      );
      throw err;
    } finally {
      // Ended already by the dispatch, unless it never ran (refused, or failed before it started).
      trace?.end('error');
    }
  });
};

/** One dispatch, streamed or answered once, on this request. */
async function dispatch(
  manager: PoolManager,
  request: FastifyRequest,
  reply: FastifyReply,
  id: string,
  body: DispatchRequest,
  trace: DispatchTrace | undefined,
): Promise<void> {
  if (reattachable(body)) return streamHeld(manager, request, reply, id, body, trace);
  const clientGone = new AbortController();
  const options = { signal: clientGone.signal, log: request.log, trace };
  // `stream: false`: one answer from the engine, one `result` line (pools/answer-dispatch.ts).
  const answer = body.stream === false ? manager.openAnswer(id, body, options) : undefined;
  const run = answer === undefined ? manager.openCompletion(id, body, options) : undefined;
  reply.raw.on('close', () => {
    // HTTP/1.1: closed before the response finished. HTTP/2 (the h2c listener): the stream was
    // reset, which marks the request aborted even though the response counts as finished.
    if (!reply.raw.writableFinished || (request.raw as { aborted?: boolean }).aborted === true) clientGone.abort();
  });
  // Written straight to the response (hijacked), the lines of one engine read in one write, with
  // no stream or promise hop in between (performance notes: hijacked NDJSON writes, coalesced
  // NDJSON writes).
  const res = startNdjson(request, reply);
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
}

/** A streamed completion or chat with a re-attach window (engine calls and `stream: false` ignore `reattach_ms`). */
function reattachable(body: DispatchRequest): boolean {
  return body.reattach_ms !== undefined && body.reattach_ms > 0 && body.stream !== false && body.call === undefined;
}

/**
 * A re-attachable dispatch: it runs on the held dispatch's own switch rather than this connection,
 * whose close only detaches it (pools/held-dispatch.ts).
 */
async function streamHeld(
  manager: PoolManager,
  request: FastifyRequest,
  reply: FastifyReply,
  id: string,
  body: DispatchRequest,
  trace: DispatchTrace | undefined,
): Promise<void> {
  const { held, run } = manager.held.hold(id, body.task_id, body.reattach_ms as number, request.log, (signal) =>
    manager.openCompletion(id, body, { signal, log: request.log, trace }),
  );
  const res = startNdjson(request, reply);
  held.attachFirst(heldSink(request, res, held));
  try {
    await run(held.emit);
  } finally {
    held.runOver();
  }
}
