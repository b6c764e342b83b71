import type { Dispatcher } from 'undici';

/**
 * The abort switch of one dispatch attempt. Its request to the node is aborted through undici's
 * own handle on that request, the {@link Dispatcher.DispatchController} the pool client's handler
 * receives when the request starts ({@link attach}); an abort that comes before then is kept and
 * applied when it does. Not an AbortSignal: undici keeps a listener on a request's signal until the
 * response body closes, i.e. for the whole token stream, and an AbortSignal with a listener is
 * ~0.9 KB (performance notes: attempt abort switch). This is one small object with one reference.
 *
 * Once aborted it stays aborted; `reason` says why (the failure policy reads it: a node loss or an
 * unaccepted dispatch is a failure, anything else a cancel).
 */
export class AttemptAbort {
  #reason: Error | undefined;
  /** The attempt's request while it runs: from its start until its response ended or failed. */
  #request: Dispatcher.DispatchController | undefined;

  get aborted(): boolean {
    return this.#reason !== undefined;
  }

  /** What `abort()` was given; an `AbortError` DOMException when it was given nothing. Undefined before. */
  get reason(): Error | undefined {
    return this.#reason;
  }

  /** Aborts once (later calls do nothing): the request, if it runs, fails at once with `reason`. */
  abort(reason?: Error): void {
    if (this.#reason !== undefined) return;
    this.#reason = reason ?? new DOMException('This operation was aborted', 'AbortError');
    const request = this.#request;
    this.#request = undefined;
    request?.abort(this.#reason);
  }

  /**
   * The attempt's request started (undici's `onRequestStart`; again if undici retries it on a new
   * connection). Aborted already: the request is aborted now, before a byte of it is sent.
   */
  attach(request: Dispatcher.DispatchController): void {
    if (this.#reason !== undefined) request.abort(this.#reason);
    else this.#request = request;
  }

  /** The request is over (its response ended or failed): an abort now only marks the attempt. */
  detach(): void {
    this.#request = undefined;
  }
}
