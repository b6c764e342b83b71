import { createParser, type EventSourceMessage } from 'eventsource-parser';

/** One server-sent event (`event` is `undefined` when the frame named none, i.e. `message`). */
export type SseEvent = EventSourceMessage;

export interface SseHandlers {
  onEvent(event: SseEvent): void;
  /** A `:` comment line (keep-alives): proof the connection is alive while nothing else happens. */
  onComment?(comment: string): void;
}

/**
 * Reads a `text/event-stream` body to its end, calling `onEvent` for every complete frame. The
 * page reads SSE from `fetch` (not `EventSource`) because EventSource cannot send the
 * `Authorization` header /v2 needs. Resolves when the body ends; rejects when reading fails (an
 * aborted request included); a handler that throws stops the read and rejects with its error.
 * Frame syntax (multi-line data, CRLF, chunk boundaries anywhere) is eventsource-parser's.
 */
export async function readSse(body: ReadableStream<Uint8Array>, handlers: SseHandlers): Promise<void> {
  let failure: { err: unknown } | undefined;
  const parser = createParser({
    onEvent: (event) => {
      if (failure) return;
      try {
        handlers.onEvent(event);
      } catch (err) {
        failure = { err };
      }
    },
    onComment: (comment) => handlers.onComment?.(comment),
  });
  const reader = body.getReader();
  // `stream: true` holds back a multi-byte character split across two chunks
  const decoder = new TextDecoder();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      parser.feed(decoder.decode(value, { stream: true }));
      if (failure) throw failure.err;
    }
  } finally {
    // releases the connection when we stop early (a handler threw); a no-op once the body ended
    await reader.cancel().catch(() => undefined);
  }
}
