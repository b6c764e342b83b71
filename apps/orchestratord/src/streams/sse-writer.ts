import type { ServerResponse } from 'node:http';
import type { TaskStream } from './task-stream.js';

export interface ServeTaskStreamOptions {
  res: ServerResponse;
  stream: TaskStream;
  /** Send the verbose variant of metrics frames. */
  verbose: boolean;
  /** Resume after this frame id (`Last-Event-ID`); undefined = from the first frame. */
  afterId: number | undefined;
  /** Keep-alive comment interval while nothing else is written, ms. */
  keepaliveMs: number;
  /** Extra response headers (correlation id). */
  headers: Readonly<Record<string, string>>;
  /** The client went away before the terminal frame was written. */
  onClientGone: () => void;
}

/**
 * Writes a task's frames to one SSE response as they are appended: straight to the socket, one
 * frame at a time, pausing on back-pressure until `drain` (the frame log holds what is not yet
 * written, so a slow client never makes the process buffer unboundedly in the socket). Ends the
 * response right after the terminal frame. A `: keep-alive` comment goes out whenever nothing was
 * written for `keepaliveMs`.
 */
export function serveTaskStream(options: ServeTaskStreamOptions): void {
  const { res, stream, verbose } = options;
  let cursor = options.afterId === undefined ? 0 : options.afterId + 1;
  let waitingDrain = false;
  let done = false;
  let keepalive: NodeJS.Timeout | undefined;

  // One timer per subscriber for its whole life, re-armed with refresh() after every write: no
  // timer is created per frame.
  const armKeepalive = (): void => {
    if (keepalive !== undefined) {
      keepalive.refresh();
      return;
    }
    keepalive = setTimeout(function onKeepalive(this: NodeJS.Timeout) {
      if (done) return;
      if (!waitingDrain) res.write(': keep-alive\n\n');
      this.refresh();
    }, options.keepaliveMs);
    keepalive.unref();
  };

  const cleanup = (): void => {
    done = true;
    unsubscribe();
    if (keepalive !== undefined) clearTimeout(keepalive);
    res.off('close', onClose);
  };

  const flush = (): void => {
    if (done || waitingDrain) return;
    while (cursor < stream.length) {
      const text = stream.text(cursor, verbose);
      cursor += 1;
      if (text === undefined) continue;
      const ok = res.write(text);
      armKeepalive();
      // Only the terminal frame is both last and in an ended stream.
      if (stream.state === 'ended' && cursor === stream.length) {
        cleanup();
        res.end();
        return;
      }
      if (!ok) {
        waitingDrain = true;
        res.once('drain', () => {
          waitingDrain = false;
          flush();
        });
        return;
      }
    }
    if (stream.state === 'ended') {
      // Resumed after the terminal frame: nothing more will come.
      cleanup();
      res.end();
    }
  };

  const onClose = (): void => {
    if (done) return;
    cleanup();
    options.onClientGone();
  };

  res.writeHead(200, {
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache, no-transform',
    connection: 'keep-alive',
    'x-accel-buffering': 'no',
    ...options.headers,
  });
  res.flushHeaders();
  const unsubscribe = stream.subscribe(flush);
  res.on('close', onClose);
  armKeepalive();
  flush();
}
