import type { ServerResponse } from 'node:http';
import type { DispatchEvent } from '@llama-orch/contracts';

/**
 * Writes a dispatch's events as NDJSON lines to a (hijacked) response. The lines of one event-loop
 * turn — every event decoded from one engine read — go out in one `write`, i.e. one syscall, from
 * a microtask queued by the first of them. When the response is backed up, `event` returns a
 * promise that settles on `drain` (or when the response closes: the dispatch is then being
 * aborted anyway); the caller pauses the engine stream until then. It never rejects.
 * Performance notes: coalesced NDJSON writes.
 */
export class NdjsonEventWriter {
  readonly #res: ServerResponse;
  #pending = '';
  #queued = false;
  #drain: Promise<void> | undefined;

  constructor(res: ServerResponse) {
    this.#res = res;
  }

  /** Queues one event's line; the promise, when there is one, is the back-pressure wait. */
  readonly event = (ev: DispatchEvent): Promise<void> | undefined => {
    this.#pending += `${JSON.stringify(ev)}\n`;
    if (!this.#queued) {
      this.#queued = true;
      queueMicrotask(this.#flush);
    }
    return this.#drain;
  };

  /**
   * {@link event} for a line already serialised (with its `\n`): a re-attachable dispatch keeps its
   * lines to replay them. Kept apart from `event` so that path stays as it was.
   */
  readonly line = (text: string): Promise<void> | undefined => {
    this.#pending += text;
    if (!this.#queued) {
      this.#queued = true;
      queueMicrotask(this.#flush);
    }
    return this.#drain;
  };

  /** Whether the response is backed up (a `drain` is awaited). */
  get backedUp(): boolean {
    return this.#drain !== undefined;
  }

  /** Writes what is queued and ends the response (no-op on a destroyed one). */
  end(): void {
    const rest = this.#pending;
    this.#pending = '';
    if (this.#res.destroyed) return;
    if (rest === '') this.#res.end();
    else this.#res.end(rest);
  }

  readonly #flush = (): void => {
    this.#queued = false;
    const text = this.#pending;
    if (text === '') return;
    this.#pending = '';
    const res = this.#res;
    if (res.destroyed || res.writableEnded) return;
    if (res.write(text) || this.#drain !== undefined) return;
    this.#drain = new Promise<void>((resolve) => {
      const done = (): void => {
        res.off('drain', done);
        res.off('close', done);
        this.#drain = undefined;
        resolve();
      };
      res.on('drain', done);
      res.on('close', done);
    });
  };
}
