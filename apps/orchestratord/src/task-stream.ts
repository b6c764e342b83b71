import type { SseFrame } from '@llama-orch/contracts';

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

export interface StoredFrame {
  /** Sequence id, from 0, no gaps; the SSE `id:` line. */
  readonly id: number;
  readonly frame: SseFrame;
  /** Variant for `?verbose=true` subscribers (metrics frames only). */
  readonly verbose?: SseFrame | undefined;
}

export type TaskStreamState = 'open' | 'ended';

export function isTerminal(frame: SseFrame): boolean {
  return frame.event === 'end' || frame.event === 'error';
}

export class TaskStream {
  readonly #frames: StoredFrame[] = [];
  readonly #listeners = new Set<() => void>();
  #state: TaskStreamState = 'open';
  #sawToken = false;

  get state(): TaskStreamState {
    return this.#state;
  }

  /** Frames stored so far. */
  get length(): number {
    return this.#frames.length;
  }

  get subscriberCount(): number {
    return this.#listeners.size;
  }

  /** The terminal frame, once written. */
  get terminal(): SseFrame | undefined {
    const last = this.#frames.at(-1);
    return this.#state === 'ended' && last !== undefined ? last.frame : undefined;
  }

  /** Appends a frame; returns its id, or undefined when the grammar forbids it now. */
  append(frame: SseFrame, verbose?: SseFrame): number | undefined {
    if (this.#state === 'ended') return undefined;
    const first = this.#frames.length === 0;
    if (first !== (frame.event === 'started')) return undefined;
    if (frame.event === 'metrics' && this.#sawToken) return undefined;
    if (frame.event === 'token') this.#sawToken = true;
    const id = this.#frames.length;
    this.#frames.push({ id, frame, verbose: frame.event === 'metrics' ? verbose : undefined });
    if (isTerminal(frame)) this.#state = 'ended';
    // A Set tolerates a listener removing itself mid-iteration; no per-frame copy.
    for (const l of this.#listeners) l();
    return id;
  }

  /** Frame at a sequence id. */
  at(id: number): StoredFrame | undefined {
    return this.#frames[id];
  }

  /** Called after every append. Returns an unsubscribe function. */
  subscribe(listener: () => void): () => void {
    this.#listeners.add(listener);
    return () => {
      this.#listeners.delete(listener);
    };
  }
}
