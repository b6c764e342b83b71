import type { ServerResponse } from 'node:http';
import { ERROR_STATUS, needsBackoffHeaders, type ErrorEvent } from '@llama-orch/contracts';
import { startEventStream } from '../streams/sse-writer.js';
import type { TaskStream } from '../streams/task-stream.js';
import { ChunkRenderer, ResponseCollector, errorChunk, type ResponseIdentity } from './chunks.js';
import { openAiErrorBody } from './openai-errors.js';

export interface OpenAiRelayOptions {
  res: ServerResponse;
  /** The admitted task's frame log (read from its first frame). */
  stream: TaskStream;
  who: ResponseIdentity;
  /** `stream: true`: chunks as they come; else one body at the end. */
  streaming: boolean;
  includeUsage: boolean;
  /** Keep-alive comment interval while a stream is silent, ms. */
  keepaliveMs: number;
  /** Extra response headers (correlation id). */
  headers: Readonly<Record<string, string>>;
  /** Engine build of the pool the task runs on (`system_fingerprint`), once placed. */
  fingerprint: () => string | undefined;
  /** The client went away before the response was complete (the caller cancels the task). */
  onClientGone: () => void;
}

/**
 * Answers a /v1 request from its task's frame log, the same log `GET /v2/tasks/{id}/events`
 * reads. A failure before anything was sent is a plain HTTP error with the ErrorEnvelope status
 * (a streaming response sends its 200 only with the first token, as llama-server does, or after
 * `keepaliveMs` of waiting, so that proxies see bytes); after that it is a last `data: {"error"…}`
 * event. Writes wait for `drain` on back-pressure. A client that leaves before the end calls
 * `onClientGone` (cancel: the engine request is aborted and its slot freed).
 */
export function relayOpenAi(o: OpenAiRelayOptions): void {
  const { res, stream } = o;
  const renderer = o.streaming ? new ChunkRenderer(o.who, o.includeUsage) : undefined;
  const collector = o.streaming ? undefined : new ResponseCollector(o.who);
  let cursor = 0;
  let headersSent = false;
  let waitingDrain = false;
  let done = false;
  let keepalive: NodeJS.Timeout | undefined;

  const cleanup = (): void => {
    done = true;
    unsubscribe();
    if (keepalive !== undefined) clearTimeout(keepalive);
    res.off('close', onClose);
  };

  const sendStreamHeaders = (): void => {
    headersSent = true;
    startEventStream(res, o.headers);
  };

  const sendJson = (status: number, body: unknown, extra: Record<string, string> = {}): void => {
    const text = JSON.stringify(body);
    res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': String(Buffer.byteLength(text)), ...extra, ...o.headers });
    cleanup();
    res.end(text);
  };

  const sendError = (err: ErrorEvent): void => {
    const body = openAiErrorBody(err);
    if (headersSent) {
      cleanup();
      res.end(errorChunk(body));
      return;
    }
    const extra: Record<string, string> = {};
    if (needsBackoffHeaders(err.code)) Object.assign(extra, { 'retry-after': '1', 'x-backoff-ms': '1000' });
    sendJson(ERROR_STATUS[err.code], body, extra);
  };

  /** Writes streamed text; false when the socket is full (resume on drain). */
  const write = (text: string): boolean => {
    if (text === '') return true;
    keepalive?.refresh();
    return res.write(text);
  };

  const flush = (): void => {
    if (done || waitingDrain) return;
    while (cursor < stream.length) {
      const frame = stream.frame(cursor);
      cursor += 1;
      if (frame === undefined || frame.event === 'started' || frame.event === 'metrics') continue;
      if (frame.event === 'error') {
        sendError(frame.data);
        return;
      }
      if (collector !== undefined) {
        if (frame.event === 'token') {
          collector.token(frame.data);
          continue;
        }
        sendJson(200, collector.body(frame.data, o.fingerprint()));
        return;
      }
      const r = renderer as ChunkRenderer;
      if (!headersSent) sendStreamHeaders();
      const opening = r.open(o.fingerprint());
      if (frame.event === 'end') {
        write(opening);
        cleanup();
        res.end(r.end(frame.data));
        return;
      }
      if (!write(opening + r.token(frame.data))) {
        waitingDrain = true;
        res.once('drain', () => {
          waitingDrain = false;
          flush();
        });
        return;
      }
    }
  };

  const onClose = (): void => {
    if (done) return;
    cleanup();
    o.onClientGone();
  };

  const unsubscribe = stream.subscribe(flush);
  res.on('close', onClose);
  if (o.streaming) {
    // One timer for the response's life, re-armed by every write.
    keepalive = setTimeout(function onKeepalive(this: NodeJS.Timeout) {
      if (done) return;
      if (!headersSent) sendStreamHeaders();
      if (!waitingDrain) res.write(': keep-alive\n\n');
      this.refresh();
    }, o.keepaliveMs);
    keepalive.unref();
  }
  flush();
}
