/**
 * The abort switch of one dispatch attempt: what an AbortController does for it, without an
 * AbortSignal. undici adds a listener to a request's signal and keeps it until the response body
 * closes, i.e. for the whole token stream, and an AbortSignal with a listener holds two Maps and a
 * hidden class of its own: ~0.9 KB per open stream (performance notes: attempt abort switch). This
 * is one small object.
 *
 * It is the request's `signal` for undici, which takes any EventTarget that has `aborted` and
 * `reason` and dispatches `abort` (its `addEventListener('abort', …, { once: true })` /
 * `removeEventListener` pair). Listeners run once, synchronously, in the `abort()` call, as an
 * AbortSignal's do.
 */
export class AttemptAbort {
  #aborted = false;
  #reason: unknown = undefined;
  /** Usually one (undici's request), created with the first. */
  #listeners: Array<() => void> | undefined;

  get aborted(): boolean {
    return this.#aborted;
  }

  /** What `abort()` was given; an `AbortError` DOMException when it was given nothing. Undefined before. */
  get reason(): unknown {
    return this.#reason;
  }

  /** Aborts once (later calls do nothing), then runs the listeners. */
  abort(reason?: unknown): void {
    if (this.#aborted) return;
    this.#aborted = true;
    this.#reason = reason ?? new DOMException('This operation was aborted', 'AbortError');
    const listeners = this.#listeners;
    this.#listeners = undefined;
    if (listeners !== undefined) for (const l of listeners) l();
  }

  addEventListener(type: 'abort', listener: () => void): void {
    if (type !== 'abort' || this.#aborted) return;
    (this.#listeners ??= []).push(listener);
  }

  removeEventListener(type: 'abort', listener: () => void): void {
    const listeners = this.#listeners;
    if (type !== 'abort' || listeners === undefined) return;
    const i = listeners.indexOf(listener);
    if (i >= 0) listeners.splice(i, 1);
  }

  /** This switch as a request's `signal` (see the class comment). */
  get signal(): AbortSignal {
    return this as unknown as AbortSignal;
  }
}
