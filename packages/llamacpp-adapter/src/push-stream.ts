import type { Readable } from 'node:stream';
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

/**
 * Reads an engine's `text/event-stream` body with `data` callbacks and hands each decoded event to
 * `onEvent` synchronously, in order: no promise, generator or iterator result per token. A promise
 * returned by `onEvent` pauses the body until it resolves (back-pressure); its rejection ends the
 * stream. Resolves once the decoder saw the end (the rest of the body drains unread); rejects with
 * what the decoder throws, what `onEvent` throws, or `bodyError(err)` for a body that broke,
 * closed early or was aborted — and then destroys the body, which closes the engine socket (the
 * engine's cancel). Performance notes: push engine stream.
 */
export function pushEngineStream(body: Readable, decoder: PayloadDecoder, onEvent: EventSink, bodyError: (err: unknown) => Error): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const splitter = new SseSplitter();
    let settled = false;
    const settle = (err?: unknown): void => {
      if (settled) return;
      settled = true;
      body.off('data', onData);
      body.off('end', onEnd);
      body.off('close', onClose);
      if (err === undefined) {
        body.resume();
        resolve();
        return;
      }
      if (!body.destroyed) body.destroy();
      reject(err);
    };
    const resume = (): void => {
      if (!settled) body.resume();
    };
    const onPayload = (p: string): boolean => {
      let ev: CompletionEvent | undefined;
      let wait: Promise<void> | void = undefined;
      try {
        ev = decoder.payload(p);
        if (ev !== undefined) wait = onEvent(ev);
      } catch (err) {
        settle(err);
        return false;
      }
      if (wait !== undefined) {
        body.pause();
        wait.then(resume, settle);
      }
      if (decoder.ended) {
        settle();
        return false;
      }
      return true;
    };
    const onData = (chunk: Buffer | string): void => {
      splitter.feed(chunk, onPayload);
    };
    const onEnd = (): void => {
      splitter.end(onPayload);
      if (settled) return;
      try {
        decoder.finish();
      } catch (err) {
        settle(err);
      }
    };
    const onClose = (): void => settle(bodyError(new Error('body closed before its end')));
    body.on('data', onData);
    body.on('end', onEnd);
    body.on('close', onClose);
    // Kept for good: a destroy after settling may still report the abort.
    body.on('error', (err: Error) => settle(bodyError(err)));
  });
}
