import type { ServerResponse } from 'node:http';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { CORRELATION_ID_HEADER } from '@llama-orch/contracts';
import type { HeldDispatch, HeldSink } from '../pools/held-dispatch.js';
import { NdjsonEventWriter } from './ndjson-writer.js';

/**
 * Takes the response over (hijacked) and sends the 200 NDJSON headers at once. orchestratord waits
 * only so long for these headers (a silent node is frozen), and HTTP/1.1 would hold them back until
 * the first line, after the engine's prompt processing; HTTP/2 sends them with writeHead.
 */
export function startNdjson(request: FastifyRequest, reply: FastifyReply): ServerResponse {
  reply.hijack();
  const res = reply.raw;
  res.writeHead(200, {
    [CORRELATION_ID_HEADER]: request.id,
    'content-type': 'application/x-ndjson; charset=utf-8',
    'cache-control': 'no-store',
  });
  if (request.raw.httpVersionMajor === 1) res.flushHeaders();
  return res;
}

/**
 * A connection attached to a re-attachable dispatch: lines go through an NDJSON writer; when the
 * response closes the dispatch is told whether it finished normally (HTTP/2: a reset stream marks
 * the request aborted even though the response counts as finished).
 */
export function heldSink(request: FastifyRequest, res: ServerResponse, held: HeldDispatch): HeldSink {
  const writer = new NdjsonEventWriter(res);
  const sink: HeldSink = {
    line: writer.line,
    end: () => writer.end(),
    supersede: () => {
      writer.end();
      // A reader that does not read would hold the engine stream on this writer's drain.
      if (writer.backedUp) res.destroy();
    },
  };
  res.on('close', () =>
    held.closed(sink, res.writableFinished && (request.raw as { aborted?: boolean }).aborted !== true),
  );
  return sink;
}
