import type { ServerResponse } from 'node:http';
import type { TaskStream } from './task-stream.js';

/**
 * Sends a 200 `text/event-stream` head at once (proxies must neither cache, transform nor buffer
 * it) with `headers` added: what every event stream of orchestratord starts with.
 */
export function startEventStream(res: ServerResponse, headers: Readonly<Record<string, string>>): void {
  res.writeHead(200, {
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache, no-transform',
    connection: 'keep-alive',
    'x-accel-buffering': 'no',
    ...headers,
  });
  res.flushHeaders();
}

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
  new SseSubscriber(options).start(options.headers);
}

/**
 * One subscriber of a task's frame log, for as long as its response is open. A class rather than a
 * set of closures over the options: a subscriber lives as long as its stream, thousands at once,
 * and this keeps one small object, two bound listeners and one timer per stream (performance
 * notes: SSE subscriber as one object).
 */
class SseSubscriber {
  readonly #res: ServerResponse;
  readonly #stream: TaskStream;
  readonly #verbose: boolean;
  readonly #keepaliveMs: number;
  readonly #onClientGone: () => void;
  /** Next frame id to write. */
  #cursor: number;
  #waitingDrain = false;
  #done = false;
  /** One timer for the subscriber's whole life, re-armed with refresh() after every write. */
  #keepalive: NodeJS.Timeout | undefined;
  /** The frame log's listener. */
  readonly #flush = (): void => this.#write();
  readonly #onClose = (): void => {
    if (this.#done) return;
    this.#cleanup();
    this.#onClientGone();
  };

  constructor(options: ServeTaskStreamOptions) {
    this.#res = options.res;
    this.#stream = options.stream;
    this.#verbose = options.verbose;
    this.#keepaliveMs = options.keepaliveMs;
    this.#onClientGone = options.onClientGone;
    this.#cursor = options.afterId === undefined ? 0 : options.afterId + 1;
  }

  start(headers: Readonly<Record<string, string>>): void {
    startEventStream(this.#res, headers);
    this.#stream.subscribe(this.#flush);
    this.#res.on('close', this.#onClose);
    this.#armKeepalive();
    this.#write();
  }

  #armKeepalive(): void {
    if (this.#keepalive !== undefined) {
      this.#keepalive.refresh();
      return;
    }
    this.#keepalive = setTimeout(keepaliveDue, this.#keepaliveMs, this);
    this.#keepalive.unref();
  }

  /** The keep-alive timer fired (via {@link keepaliveDue}): nothing was written for `keepaliveMs`. */
  keepalive(): void {
    if (this.#done) return;
    if (!this.#waitingDrain) this.#res.write(': keep-alive\n\n');
    this.#keepalive?.refresh();
  }

  #cleanup(): void {
    this.#done = true;
    this.#stream.unsubscribe(this.#flush);
    if (this.#keepalive !== undefined) clearTimeout(this.#keepalive);
    this.#res.off('close', this.#onClose);
  }

  #write(): void {
    if (this.#done || this.#waitingDrain) return;
    const stream = this.#stream;
    while (this.#cursor < stream.length) {
      const text = stream.text(this.#cursor, this.#verbose);
      this.#cursor += 1;
      if (text === undefined) continue;
      const ok = this.#res.write(text);
      this.#armKeepalive();
      // Only the terminal frame is both last and in an ended stream.
      if (stream.state === 'ended' && this.#cursor === stream.length) {
        this.#cleanup();
        this.#res.end();
        return;
      }
      if (!ok) {
        this.#waitingDrain = true;
        this.#res.once('drain', () => {
          this.#waitingDrain = false;
          this.#write();
        });
        return;
      }
    }
    if (stream.state === 'ended') {
      // Resumed after the terminal frame: nothing more will come.
      this.#cleanup();
      this.#res.end();
    }
  }
}

/** The keep-alive timer's callback, with the subscriber as its argument: no closure per timer. */
function keepaliveDue(subscriber: SseSubscriber): void {
  subscriber.keepalive();
}
