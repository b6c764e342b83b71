import type { DashboardSnapshot } from '@llama-orch/contracts';
import {
  EventStreamResponse,
  type EventStreamResponseOptions,
  type EventStreamState,
} from '../streams/event-stream-response.js';

/** One `snapshot` event of `GET /v2/dashboard/events` (serialised once, written to every open stream). */
export function snapshotEvent(snapshot: DashboardSnapshot): string {
  return `event: snapshot\ndata: ${JSON.stringify(snapshot)}\n\n`;
}

export interface SnapshotStreamOptions extends EventStreamResponseOptions {
  /** The stream ended, by either side ({@link SnapshotStream.end} or the client leaving); called once. */
  onEnd: () => void;
}

/** `open` → `ended` (the client left, or end() was called: the response is finished). */
export type SnapshotStreamState = EventStreamState;

/**
 * One dashboard event stream. Each snapshot replaces the last, so a slow client never makes the
 * process buffer more than one: while the socket is full, only the newest snapshot waits for
 * `drain` and the ones in between are skipped. Head, keep-alives and close: {@link EventStreamResponse}.
 */
export class SnapshotStream extends EventStreamResponse {
  readonly #onEnd: () => void;
  /** Newest event not written yet because the socket was full. */
  #waiting: string | undefined;

  constructor(o: SnapshotStreamOptions) {
    super(o);
    this.#onEnd = o.onEnd;
    this.listen();
  }

  /** Writes one event (from {@link snapshotEvent}), or keeps it as the newest while the socket is full. */
  send(text: string): void {
    if (this.state !== 'open') return;
    if (this.waitingDrain) {
      this.#waiting = text;
      return;
    }
    this.write(text);
  }

  /** Ends the response (app closing). Idempotent. */
  end(): void {
    this.finish();
  }

  protected drained(): void {
    const text = this.#waiting;
    this.#waiting = undefined;
    if (text !== undefined) this.send(text);
  }

  protected stopped(): void {
    this.#waiting = undefined;
    this.#onEnd();
  }
}
