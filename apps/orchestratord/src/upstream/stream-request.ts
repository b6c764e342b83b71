import { Readable } from 'node:stream';
import { errors, type Dispatcher } from 'undici';
import type { AttemptAbort } from './attempt-abort.js';

/** A node's answer to a streamed request: its status once the headers came, and its body as it arrives. */
export interface StreamResponse {
  readonly statusCode: number;
  readonly body: ResponseBody;
}

function ignore(): void {}

/**
 * A response body fed by undici's handler calls. Back-pressure goes through the request's
 * controller (`pause()` when the buffer is full, `resume()` when the reader wants more); destroying
 * the body before the response ended aborts the request, which closes its HTTP/2 stream or
 * HTTP/1.1 socket (that is how a reader that stops frees the engine's slot on the node).
 */
export class ResponseBody extends Readable {
  readonly #request: Dispatcher.DispatchController;
  /** The response ended or failed: nothing left to abort. */
  #over = false;

  constructor(request: Dispatcher.DispatchController) {
    // undici's own body's buffer (Node 20's default for a Readable is 16 KiB).
    super({ highWaterMark: 64 * 1024 });
    this.#request = request;
  }

  /** The last byte came. */
  finish(): void {
    this.#over = true;
    this.push(null);
  }

  /** The request failed (the node, the connection, or our abort with its reason): the body errors with `err`. */
  fail(err: Error): void {
    this.#over = true;
    // As undici's body: an error nobody listens for (yet) must not become an uncaught exception.
    this.on('error', ignore);
    this.destroy(err);
  }

  override _read(): void {
    this.#request.resume();
  }

  override _destroy(err: Error | null, callback: (error?: Error | null) => void): void {
    if (!this.#over) this.#request.abort(err ?? new errors.RequestAbortedError());
    // Failed before anyone reads it (the request failed in the turn its headers came): its `error`
    // and `close` wait a turn, so the reader that awaited the response still sees them.
    if (this.readableFlowing === null) setImmediate(callback, err);
    else callback(err);
  }
}

/**
 * undici's handler for one streamed request: resolves with the status and the body once the
 * headers came, rejects with the request's error before then, and hands the request's controller
 * to the attempt's {@link AttemptAbort} for as long as the request runs. Nothing is allocated per
 * chunk: a chunk is pushed to the body as it is.
 */
class StreamHandler implements Dispatcher.DispatchHandler {
  readonly #abort: AttemptAbort;
  #resolve: ((response: StreamResponse) => void) | undefined;
  #reject: ((err: Error) => void) | undefined;
  #body: ResponseBody | undefined;

  constructor(abort: AttemptAbort, resolve: (response: StreamResponse) => void, reject: (err: Error) => void) {
    this.#abort = abort;
    this.#resolve = resolve;
    this.#reject = reject;
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.#abort.attach(controller);
  }

  onResponseStart(controller: Dispatcher.DispatchController, statusCode: number): void {
    if (statusCode < 200) return; // informational (1xx): the answer follows
    const body = new ResponseBody(controller);
    this.#body = body;
    const resolve = this.#resolve;
    this.#resolve = undefined;
    this.#reject = undefined;
    resolve?.({ statusCode, body });
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.#body?.push(chunk) === false) controller.pause();
  }

  onResponseEnd(): void {
    this.#abort.detach();
    this.#body?.finish();
  }

  onResponseError(_controller: Dispatcher.DispatchController, err: Error): void {
    this.#abort.detach();
    const reject = this.#reject;
    this.#resolve = undefined;
    this.#reject = undefined;
    if (reject !== undefined) reject(err);
    else this.#body?.fail(err);
  }
}

/**
 * Sends one request whose answer is read as a stream, aborted through `abort`: an abort before the
 * headers rejects with its reason, one after them fails the body with it. An attempt aborted
 * already sends nothing.
 */
export function streamRequest(
  dispatcher: Dispatcher,
  options: Dispatcher.DispatchOptions,
  abort: AttemptAbort,
): Promise<StreamResponse> {
  return new Promise<StreamResponse>((resolve, reject) => {
    const reason = abort.reason;
    if (reason !== undefined) reject(reason);
    else dispatcher.dispatch(options, new StreamHandler(abort, resolve, reject));
  });
}
