import type { ErrorEvent } from '@llama-orch/contracts';
import { EventStreamResponse, type EventStreamResponseOptions } from './event-stream-response.js';
import type { FrameEncoder } from './frame-encoder.js';
import type { TaskStream } from './task-stream.js';

export interface TaskEventStreamOptions extends EventStreamResponseOptions {
  stream: TaskStream;
  /** The door's wire form of a frame. */
  encoder: FrameEncoder;
  /** Resume after this frame id (`Last-Event-ID`); undefined = from the first frame. */
  afterId?: number | undefined;
  /**
   * The client left before the terminal frame and nobody else reads the task: the caller cancels
   * it (disconnect = cancel; the engine's slot is freed).
   */
  onAbandoned: () => void;
  /**
   * With `lazyHead`: the task failed before anything was written. The stream stops without a
   * head, and the caller answers with the error's HTTP status (a door's status codes are its
   * http/ route's). Without it, an error frame is encoded like any other.
   */
  onRefused?: (err: ErrorEvent) => void;
}

/**
 * Writes a task's frame log to one client as frames are appended, through the door's
 * {@link FrameEncoder}: straight to the socket, one frame at a time, pausing on back-pressure (the
 * log holds what is not yet written), and ends the response with the terminal frame. Every task
 * stream — `/v2` events, the `/v2` admission stream, `/v1` chunks — is one of these.
 */
export class TaskEventStream extends EventStreamResponse {
  readonly #stream: TaskStream;
  readonly #encoder: FrameEncoder;
  readonly #onAbandoned: () => void;
  readonly #onRefused: ((err: ErrorEvent) => void) | undefined;
  /** Next frame id to write. */
  #cursor: number;
  /** The frame log's listener. */
  readonly #flush = (): void => this.#pump();

  constructor(o: TaskEventStreamOptions) {
    super(o);
    this.#stream = o.stream;
    this.#encoder = o.encoder;
    this.#onAbandoned = o.onAbandoned;
    this.#onRefused = o.onRefused;
    this.#cursor = o.afterId === undefined ? 0 : o.afterId + 1;
    o.stream.subscribe(this.#flush);
    this.listen();
    this.#pump();
  }

  protected drained(): void {
    this.#pump();
  }

  protected stopped(clientGone: boolean): void {
    if (this.#stream.leave(this.#flush) && clientGone) this.#onAbandoned();
  }

  #pump(): void {
    if (this.state !== 'open' || this.waitingDrain) return;
    const stream = this.#stream;
    const encoder = this.#encoder;
    while (this.#cursor < stream.length) {
      const id = this.#cursor;
      this.#cursor += 1;
      const frame = stream.frame(id, encoder.verbose);
      if (frame === undefined) continue;
      if (frame.event === 'error' && !this.headSent && this.#onRefused !== undefined) {
        this.detach();
        this.#onRefused(frame.data);
        return;
      }
      const text = encoder.encode(id, frame);
      // Only the terminal frame is both last and in an ended stream.
      if (stream.state === 'ended' && this.#cursor === stream.length) {
        this.finish(text);
        return;
      }
      if (text !== '' && !this.write(text)) return;
    }
    // Resumed at or past the terminal frame: it is sent again, so a client whose frame ids ran
    // ahead of this log (a task taken over from a dead replica that ended before its tokens came
    // back) learns that the task is over instead of reconnecting for ever — under the id after its
    // own, so the ids it saw stay consecutive.
    const terminal = stream.terminal;
    if (terminal !== undefined)
      this.finish(encoder.encode(this.#cursor > stream.length ? this.#cursor : stream.length - 1, terminal));
    // Another replica took the task over: no terminal frame, so the client reconnects and reaches it.
    else if (stream.state === 'moved') this.finish();
  }
}
