import { formatSseFrame, type SseFrame } from '@llama-orch/contracts';

/**
 * Per-task frame log: the single source every SSE subscriber reads from, so late subscribers and
 * `Last-Event-ID` resumes see exactly the frames others saw, with the same ids.
 *
 * Grammar enforced here: `started` first → `metrics`* → `token`* → exactly one of `end` | `error`.
 * Anything else (a second `started`, metrics after a token, anything after the terminal frame) is
 * refused: `append` returns undefined. This is what guarantees "no token after a cancel's `end`".
 * A `metrics` frame may carry a verbose variant (with `human`, `phase`, `prep`) that verbose
 * subscribers read instead; both share one id.
 */

export type TaskStreamState = 'open' | 'ended';

export function isTerminal(frame: SseFrame): boolean {
  return frame.event === 'end' || frame.event === 'error';
}

export class TaskStream {
  /**
   * Each frame as it goes on the wire (`formatSseFrame`), serialised once at append: subscribers
   * write these strings, and a long stream keeps one string per frame instead of three objects.
   */
  readonly #texts: string[] = [];
  /** Verbose variants of `metrics` frames, by id (created with the first; most tasks never get one). */
  #verbose: Map<number, string> | undefined;
  /**
   * Subscribers: none, the one function (the usual case: a Set per open stream was ~150 B), or a Set
   * from the second on (kept once made).
   */
  #listeners: (() => void) | Set<() => void> | undefined;
  /**
   * The frame being appended, while its listeners run: a reader that keeps up (the /v1 door reads
   * each frame from its append's listener call) gets it without parsing the wire text back. Dropped
   * when they return, so the log holds only strings: kept until the next append, a token's objects
   * outlived two young-generation GCs on a slow stream and became old-generation garbage (~0.9 KB
   * per stream in `pnpm bench streams`; performance notes: frame objects not kept).
   */
  #last: SseFrame | undefined;
  #state: TaskStreamState = 'open';
  #sawToken = false;
  #terminal: SseFrame | undefined;

  get state(): TaskStreamState {
    return this.#state;
  }

  /** Frames stored so far; ids are 0 … length − 1. */
  get length(): number {
    return this.#texts.length;
  }

  get subscriberCount(): number {
    const l = this.#listeners;
    return l === undefined ? 0 : typeof l === 'function' ? 1 : l.size;
  }

  /** The terminal frame, once written. */
  get terminal(): SseFrame | undefined {
    return this.#terminal;
  }

  /** Appends a frame; returns its id, or undefined when the grammar forbids it now. */
  append(frame: SseFrame, verbose?: SseFrame): number | undefined {
    if (this.#state === 'ended') return undefined;
    const first = this.#texts.length === 0;
    if (first !== (frame.event === 'started')) return undefined;
    if (frame.event === 'metrics' && this.#sawToken) return undefined;
    if (frame.event === 'token') this.#sawToken = true;
    const id = this.#texts.length;
    this.#texts.push(formatSseFrame(id, frame));
    this.#last = frame;
    if (frame.event === 'metrics' && verbose !== undefined) (this.#verbose ??= new Map()).set(id, formatSseFrame(id, verbose));
    if (isTerminal(frame)) {
      this.#state = 'ended';
      this.#terminal = frame;
    }
    // A Set tolerates a listener removing itself mid-iteration; no per-frame copy.
    const listeners = this.#listeners;
    if (typeof listeners === 'function') listeners();
    else if (listeners !== undefined) for (const l of listeners) l();
    this.#last = undefined;
    return id;
  }

  /** Wire text of a frame (its verbose variant when asked and there is one). */
  text(id: number, verbose = false): string | undefined {
    return (verbose ? this.#verbose?.get(id) : undefined) ?? this.#texts[id];
  }

  /**
   * A frame back as an object, parsed from its wire text (`event` and `data` lines): for readers
   * that re-encode frames (the /v1 door's OpenAI chunks). Undefined past the end. Read from a
   * listener, the frame being appended is the appended object itself (readers must not modify it).
   */
  frame(id: number): SseFrame | undefined {
    if (id === this.#texts.length - 1 && this.#last !== undefined) return this.#last;
    const text = this.#texts[id];
    if (text === undefined) return undefined;
    const ev = text.indexOf('\nevent: ') + 8;
    const data = text.indexOf('\ndata: ', ev);
    return { event: text.slice(ev, data), data: JSON.parse(text.slice(data + 7, text.length - 2)) } as SseFrame;
  }

  /** Called after every append. Returns an unsubscribe function (or call {@link unsubscribe}). */
  subscribe(listener: () => void): () => void {
    const l = this.#listeners;
    if (l === undefined) this.#listeners = listener;
    else if (typeof l === 'function') this.#listeners = new Set([l, listener]);
    else l.add(listener);
    return () => this.unsubscribe(listener);
  }

  unsubscribe(listener: () => void): void {
    const l = this.#listeners;
    if (l === listener) this.#listeners = undefined;
    else if (typeof l === 'object') l.delete(listener);
  }
}
