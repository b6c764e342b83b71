import type { ServerResponse } from 'node:http';

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

export const KEEPALIVE = ': keep-alive\n\n';

export interface EventStreamResponseOptions {
  res: ServerResponse;
  /** Keep-alive comment interval while nothing else is written, ms. */
  keepaliveMs: number;
  /** Extra response headers (correlation id). */
  headers: Readonly<Record<string, string>>;
  /**
   * Send the 200 head with the first write (or the first keep-alive) rather than at once, so that
   * a refusal before anything was written can still be a plain HTTP error (the /v1 door).
   * @default false
   */
  lazyHead?: boolean;
}

/** `open` → `ended` (by end(), by a caller that answers otherwise, or by the client leaving). */
export type EventStreamState = 'open' | 'ended';

/**
 * One event-stream response on a raw (hijacked) `ServerResponse`, whatever it carries: the 200
 * head, a `: keep-alive` comment after `keepaliveMs` without writes (one timer for the response's
 * life, refreshed by every write), back-pressure (a write that fills the socket makes
 * {@link drained} wait for `drain`; subclasses write nothing meanwhile, so the process never
 * buffers unboundedly for a slow client), and close (the client leaving before the end is reported
 * once, to {@link stopped}). Subclasses say what is written: a task's frame log through a door's
 * encoder (`TaskEventStream`), the dashboard's snapshots (`SnapshotStream`). One object per open
 * stream, its listeners bound once (performance notes: SSE subscriber as one object).
 */
export abstract class EventStreamResponse {
  protected readonly res: ServerResponse;
  /** Kept until the head is sent (lazy head only). */
  #headers: Readonly<Record<string, string>> | undefined;
  #headSent = false;
  #waitingDrain = false;
  #state: EventStreamState = 'open';
  readonly #keepaliveMs: number;
  #keepalive: NodeJS.Timeout | undefined;
  readonly #onClose = (): void => {
    if (this.#stop()) this.stopped(true);
  };
  readonly #onDrain = (): void => {
    this.#waitingDrain = false;
    if (this.#state === 'open') this.drained();
  };

  constructor(o: EventStreamResponseOptions) {
    this.res = o.res;
    this.#keepaliveMs = o.keepaliveMs;
    this.#headers = o.headers;
    if (o.lazyHead !== true) this.#sendHead();
  }

  get state(): EventStreamState {
    return this.#state;
  }

  /** Whether the 200 head went out. */
  get headSent(): boolean {
    return this.#headSent;
  }

  /** Whether a write is waiting for `drain`. */
  get waitingDrain(): boolean {
    return this.#waitingDrain;
  }

  /** Starts watching the response (close, keep-alives); call once, after the subclass is set up. */
  protected listen(): void {
    this.res.on('close', this.#onClose);
    this.#keepalive = setTimeout(keepaliveDue, this.#keepaliveMs, this);
    this.#keepalive.unref();
  }

  /** The socket took what was waiting: write on. */
  protected abstract drained(): void;

  /**
   * The stream stopped, once: `clientGone` when the client left before the end, else by
   * {@link finish} or {@link detach}. Undo the subclass's subscriptions here.
   */
  protected abstract stopped(clientGone: boolean): void;

  /**
   * Writes `text` (sending the head first when it is still due); false when the socket is full:
   * write nothing more until {@link drained}.
   */
  protected write(text: string): boolean {
    if (!this.#headSent) this.#sendHead();
    this.#keepalive?.refresh();
    if (this.res.write(text)) return true;
    this.#waitingDrain = true;
    this.res.once('drain', this.#onDrain);
    return false;
  }

  /** Writes `text` (when not empty) and ends the response. */
  protected finish(text = ''): void {
    if (!this.#stop()) return;
    if (!this.#headSent) this.#sendHead();
    if (text === '') this.res.end();
    else this.res.end(text);
    this.stopped(false);
  }

  /** Stops without writing anything more: the caller answers on `res` itself (before any head). */
  protected detach(): void {
    if (this.#stop()) this.stopped(false);
  }

  /** The keep-alive timer fired (via {@link keepaliveDue}): nothing was written for `keepaliveMs`. */
  keepalive(): void {
    if (this.#state !== 'open') return;
    if (!this.#headSent) this.#sendHead();
    if (!this.#waitingDrain) this.res.write(KEEPALIVE);
    this.#keepalive?.refresh();
  }

  #sendHead(): void {
    this.#headSent = true;
    startEventStream(this.res, this.#headers ?? {});
    this.#headers = undefined;
  }

  /** open → ended; false when it already was. */
  #stop(): boolean {
    if (this.#state !== 'open') return false;
    this.#state = 'ended';
    if (this.#keepalive !== undefined) clearTimeout(this.#keepalive);
    this.res.off('close', this.#onClose);
    this.res.off('drain', this.#onDrain);
    return true;
  }
}

/** The keep-alive timer's callback, with the stream as its argument: no closure per timer. */
function keepaliveDue(stream: EventStreamResponse): void {
  stream.keepalive();
}
