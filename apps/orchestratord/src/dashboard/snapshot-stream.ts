import type { ServerResponse } from 'node:http';
import type { DashboardSnapshot } from '@llama-orch/contracts';
import { startEventStream } from '../streams/sse-writer.js';

/** One `snapshot` event of `GET /v2/dashboard/events` (serialised once, written to every open stream). */
export function snapshotEvent(snapshot: DashboardSnapshot): string {
  return `event: snapshot\ndata: ${JSON.stringify(snapshot)}\n\n`;
}

export interface SnapshotStreamOptions {
  res: ServerResponse;
  /** Keep-alive comment interval while nothing else is written, ms. */
  keepaliveMs: number;
  /** Extra response headers (correlation id). */
  headers: Readonly<Record<string, string>>;
  /** The stream ended, by either side ({@link SnapshotStream.end} or the client leaving); called once. */
  onEnd: () => void;
}

/** `open` → `ended` (the client left, or end() was called: the response is finished). */
export type SnapshotStreamState = 'open' | 'ended';

/**
 * One dashboard event stream on a raw response. Each snapshot replaces the last, so a slow client
 * never makes the process buffer more than one: while the socket is full, only the newest
 * snapshot waits for `drain` and the ones in between are skipped. A `: keep-alive` comment goes out
 * after `keepaliveMs` without writes (one timer for the stream's life, refreshed).
 */
export class SnapshotStream {
  readonly #res: ServerResponse;
  readonly #onEnd: () => void;
  readonly #keepalive: NodeJS.Timeout;
  #state: SnapshotStreamState = 'open';
  /** Newest event not written yet because the socket was full. */
  #waiting: string | undefined;
  #draining = false;
  readonly #onClose = (): void => this.#finish();
  readonly #onDrain = (): void => {
    this.#draining = false;
    const text = this.#waiting;
    this.#waiting = undefined;
    if (text !== undefined) this.send(text);
  };

  constructor(o: SnapshotStreamOptions) {
    this.#res = o.res;
    this.#onEnd = o.onEnd;
    startEventStream(o.res, o.headers);
    o.res.on('close', this.#onClose);
    this.#keepalive = setTimeout(() => {
      if (this.#state !== 'open') return;
      if (!this.#draining) o.res.write(': keep-alive\n\n');
      this.#keepalive.refresh();
    }, o.keepaliveMs);
    this.#keepalive.unref();
  }

  get state(): SnapshotStreamState {
    return this.#state;
  }

  /** Writes one event (from {@link snapshotEvent}), or keeps it as the newest while the socket is full. */
  send(text: string): void {
    if (this.#state !== 'open') return;
    if (this.#draining) {
      this.#waiting = text;
      return;
    }
    this.#keepalive.refresh();
    if (!this.#res.write(text)) {
      this.#draining = true;
      this.#res.once('drain', this.#onDrain);
    }
  }

  /** Ends the response (app closing). Idempotent. */
  end(): void {
    if (this.#state !== 'open') return;
    this.#finish();
    this.#res.end();
  }

  #finish(): void {
    if (this.#state !== 'open') return;
    this.#state = 'ended';
    clearTimeout(this.#keepalive);
    this.#res.off('close', this.#onClose);
    this.#res.off('drain', this.#onDrain);
    this.#waiting = undefined;
    this.#onEnd();
  }
}
