import type { Dispatcher } from 'undici';
import { SseSplitter } from './sse-splitter.js';
import type { CompletionEvent } from './stream-events.js';

/** Receives each event of a push stream; a returned promise pauses the body until it settles. */
export type EventSink = (ev: CompletionEvent) => Promise<void> | void;

/** What {@link pushEngineStream} needs of a decoder (`CompletionDecoder`, `ChatDecoder`). */
export interface PayloadDecoder {
  readonly ended: boolean;
  /** The event of one `data:` payload, or undefined; throws adapter errors. */
  payload(payload: string): CompletionEvent | undefined;
  /** The payloads ended; throws unless the final frame came. */
  finish(): void;
}

/** How the failures of one engine stream become the adapter's errors. */
export interface StreamErrors {
  /** The engine answered something other than 200 (with its body text): the error to reject with. */
  status(statusCode: number, text: string): Error;
  /** The request failed before the response headers (connect, headers timeout, abort). */
  beforeHeaders(err: Error): Error;
  /** The body broke, timed out or was aborted. */
  body(err: Error): Error;
  /** The caller's signal fired. */
  aborted(reason: unknown): Error;
}

export interface EngineStreamRequest {
  dispatcher: Dispatcher;
  options: Dispatcher.DispatchOptions;
  decoder: PayloadDecoder;
  onEvent: EventSink;
  signal: AbortSignal | undefined;
  errors: StreamErrors;
}

/**
 * One streaming request to the engine through undici's `dispatch` handler API: each body chunk goes
 * from the HTTP parser straight to the SSE splitter and the decoder, and each event to `onEvent`,
 * synchronously and in order — no body stream, promise, generator or iterator result per token. A
 * promise returned by `onEvent` pauses the response until it resolves (back-pressure); its
 * rejection ends the stream. Resolves once the decoder saw the end (the rest of the body drains
 * unread); rejects with the decoder's or `onEvent`'s error, or one of `errors`, and then aborts
 * the request, which closes the engine socket (the engine's cancel). Performance notes: push
 * engine stream.
 */
export function pushEngineStream(r: EngineStreamRequest): Promise<void> {
  const { decoder, onEvent, signal, errors } = r;
  return new Promise<void>((resolve, reject) => {
    const splitter = new SseSplitter();
    let controller: Dispatcher.DispatchController | undefined;
    let statusCode: number | undefined;
    let errorText = '';
    let settled = false;
    const settle = (err?: unknown): void => {
      if (settled) return;
      settled = true;
      signal?.removeEventListener('abort', onAbort);
      if (err === undefined) {
        resolve();
        return;
      }
      if (controller !== undefined && !controller.aborted) controller.abort(err as Error);
      reject(err);
    };
    const onAbort = (): void => settle(errors.aborted(signal?.reason));
    const resume = (): void => {
      if (!settled) controller?.resume();
    };
    const onPayload = (p: string): boolean => {
      // Settled by an abort or an error inside this chunk: nothing more is handed out.
      if (settled) return false;
      let wait: Promise<void> | void = undefined;
      try {
        const ev = decoder.payload(p);
        if (ev !== undefined) wait = onEvent(ev);
      } catch (err) {
        settle(err);
        return false;
      }
      if (wait !== undefined) {
        controller?.pause();
        wait.then(resume, settle);
      }
      if (decoder.ended) {
        settle();
        return false;
      }
      return true;
    };
    const handler: Dispatcher.DispatchHandler = {
      onRequestStart(c) {
        controller = c;
        if (settled) c.abort(new Error('stream settled before the request started'));
      },
      onResponseStart(_c, code) {
        if (code >= 200) statusCode = code;
      },
      onResponseData(_c, chunk) {
        if (settled) return;
        if (statusCode !== 200) errorText += chunk.toString('utf8');
        else splitter.feed(chunk, onPayload);
      },
      onResponseEnd() {
        if (settled) return;
        if (statusCode !== 200) {
          settle(errors.status(statusCode ?? 0, errorText));
          return;
        }
        splitter.end(onPayload);
        if (settled) return;
        try {
          decoder.finish();
        } catch (err) {
          settle(err);
        }
      },
      onResponseError(_c, err) {
        if (settled) return;
        if (signal?.aborted === true) settle(errors.aborted(signal.reason));
        else settle(statusCode === undefined ? errors.beforeHeaders(err) : errors.body(err));
      },
    };
    if (signal?.aborted === true) {
      settle(errors.aborted(signal.reason));
      return;
    }
    signal?.addEventListener('abort', onAbort, { once: true });
    r.dispatcher.dispatch(r.options, handler);
  });
}
