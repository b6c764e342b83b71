import { formatSseFrame, type MetricsEvent, type SseFrame, type TokenEvent } from '@llama-orch/contracts';

/**
 * Per-task frame log: the single source every subscriber reads from, whatever its door, so late
 * subscribers and `Last-Event-ID` resumes see exactly the frames others saw, with the same ids.
 * It keeps records (each frame's payload as a plain object), never wire text: each door encodes a
 * record when it writes it (`streams/frame-encoder.ts`), so a token is serialised once, by the door
 * that sends it.
 *
 * Grammar enforced here: `started` first → `metrics`* → `token`* → exactly one of `end` | `error`.
 * Anything else (a second `started`, metrics after a token, anything after the terminal frame) is
 * refused: `append` returns undefined. This is what guarantees "no token after a cancel's `end`".
 * A `metrics` frame may carry a verbose variant (with `human`, `phase`, `prep`) that verbose
 * subscribers read instead; both share one id.
 */

/** `moved`: another replica took the task over; its log goes on there (see {@link TaskStream.moved}). */
export type TaskStreamState = 'open' | 'ended' | 'moved';

export function isTerminal(frame: SseFrame): boolean {
  return frame.event === 'end' || frame.event === 'error';
}

/** A subscriber's callback, run after every append. */
export type FrameListener = () => void;

export class TaskStream {
  /**
   * The frames, by id: a token frame as its payload alone (`{t, i}`, nothing around it: most of a
   * log), every other frame as appended. Tokens are contiguous (the grammar), so the ids from
   * {@link #firstToken} to {@link #tokenEnd} are the token frames.
   */
  readonly #records: (TokenEvent | SseFrame)[] = [];
  /** Id of the first token frame (-1: none yet) and one past the last. */
  #firstToken = -1;
  #tokenEnd = -1;
  /** Verbose variants of `metrics` frames, by id (created with the first; most tasks never get one). */
  #verbose: Map<number, MetricsEvent> | undefined;
  /**
   * Subscribers: none, the one function (the usual case), or a Set from the second on (kept once
   * made). Performance notes: one subscriber without a Set.
   */
  #listeners: FrameListener | Set<FrameListener> | undefined;
  /** The frame being appended, while its listeners run: what {@link frame} returns for it. */
  #last: SseFrame | undefined;
  #terminal: SseFrame | undefined;
  /** The id the terminal frame gets once appended, from {@link reserveEnd} on (-1: not ending). */
  #ending = -1;
  #moved = false;

  get state(): TaskStreamState {
    return this.#terminal !== undefined ? 'ended' : this.#moved ? 'moved' : 'open';
  }

  /** Frames stored so far; ids are 0 … length − 1. */
  get length(): number {
    return this.#records.length;
  }

  get subscriberCount(): number {
    const l = this.#listeners;
    return l === undefined ? 0 : typeof l === 'function' ? 1 : l.size;
  }

  /** Id of the first token frame, -1 before one; with {@link tokenRecords}, what a task's shared record keeps to replay it. */
  get firstTokenId(): number {
    return this.#firstToken;
  }

  /** The token frames' payloads, in order (a copy of the list). */
  tokenRecords(): TokenEvent[] {
    return this.#firstToken < 0 ? [] : (this.#records.slice(this.#firstToken, this.#tokenEnd) as TokenEvent[]);
  }

  /** The terminal frame, once written. */
  get terminal(): SseFrame | undefined {
    return this.#terminal;
  }

  /**
   * Another replica owns the task now and serves the rest of its log, with the same ids (spec 65,
   * Orphans): nothing more is appended here, and readers stop without a terminal frame, so that
   * they reconnect with `Last-Event-ID` and reach that replica. Only an open log moves.
   */
  moved(): void {
    if (this.state !== 'open') return;
    this.#moved = true;
    this.#notify();
  }

  /**
   * The task has ended and its terminal frame is on its way (with a cluster, after the shared
   * record holds it: spec 65, Ending): from now on only that frame is appended, so the id returned
   * here is the one it gets. Idempotent.
   */
  reserveEnd(): number {
    if (this.#ending < 0) this.#ending = this.#records.length;
    return this.#ending;
  }

  /** Appends a frame; returns its id, or undefined when the grammar forbids it now. */
  append(frame: SseFrame, verbose?: SseFrame): number | undefined {
    if (this.#terminal !== undefined || this.#moved) return undefined;
    if (this.#ending >= 0 && !isTerminal(frame)) return undefined;
    const id = this.#records.length;
    if ((id === 0) !== (frame.event === 'started')) return undefined;
    if (frame.event === 'metrics' && this.#firstToken >= 0) return undefined;
    if (frame.event === 'token') {
      if (this.#firstToken < 0) this.#firstToken = id;
      this.#tokenEnd = id + 1;
      this.#records.push(frame.data);
    } else {
      this.#records.push(frame);
    }
    if (frame.event === 'metrics' && verbose?.event === 'metrics') (this.#verbose ??= new Map()).set(id, verbose.data);
    if (isTerminal(frame)) this.#terminal = frame;
    this.#last = frame;
    this.#notify();
    this.#last = undefined;
    return id;
  }

  #notify(): void {
    // A Set tolerates a listener removing itself mid-iteration; no per-frame copy.
    const listeners = this.#listeners;
    if (typeof listeners === 'function') listeners();
    else if (listeners !== undefined) for (const l of listeners) l();
  }

  /** Appends a token frame (the relay's path: no frame object around the record). */
  appendToken(token: TokenEvent): number | undefined {
    return this.append({ event: 'token', data: token });
  }

  /**
   * Frame `id` as a record (its verbose variant when asked and there is one); undefined past the
   * end. Read from a listener, the frame being appended is the appended object itself. Readers must
   * not modify what they get.
   */
  frame(id: number, verbose = false): SseFrame | undefined {
    const variant = verbose ? this.#verbose?.get(id) : undefined;
    const last = this.#last;
    if (last !== undefined && variant === undefined && id === this.#records.length - 1) return last;
    if (variant !== undefined) return { event: 'metrics', data: variant };
    const record = this.#records[id];
    if (record === undefined) return undefined;
    return id >= this.#firstToken && id < this.#tokenEnd
      ? { event: 'token', data: record as TokenEvent }
      : (record as SseFrame);
  }

  /** Frame `id` as `/v2` sends it (`formatSseFrame`); undefined past the end. */
  text(id: number, verbose = false): string | undefined {
    const frame = this.frame(id, verbose);
    return frame === undefined ? undefined : formatSseFrame(id, frame);
  }

  /** Called after every append. Returns an unsubscribe function (or call {@link unsubscribe}). */
  subscribe(listener: FrameListener): () => void {
    const l = this.#listeners;
    if (l === undefined) this.#listeners = listener;
    else if (typeof l === 'function') this.#listeners = new Set([l, listener]);
    else l.add(listener);
    return () => this.unsubscribe(listener);
  }

  unsubscribe(listener: FrameListener): void {
    const l = this.#listeners;
    if (l === listener) this.#listeners = undefined;
    else if (typeof l === 'object') l.delete(listener);
  }

  /**
   * A subscriber's client went away: unsubscribes it and says whether the task is now abandoned
   * (still open, nobody left reading it), which is when a disconnect cancels the task.
   */
  leave(listener: FrameListener): boolean {
    this.unsubscribe(listener);
    return this.state === 'open' && this.subscriberCount === 0;
  }
}
