import type { ChatInput, CompletionInput } from '../completion-body.js';
import type { LlamaServerClient } from '../llama-server-client.js';
import type { EventSink } from '../push-stream.js';
import type { CompletionEvent } from '../stream-events.js';

/**
 * The push stream of `completeInto` / `chatInto` (the product path) as an async iterator, for tests
 * that read events one by one. Leaving the loop early aborts the request — llama-server's cancel —
 * as a client going away does; `signal` aborts it from outside. Errors of the stream are thrown
 * after the events that came before them.
 */
export async function* pullEvents(
  start: (onEvent: EventSink, signal: AbortSignal) => Promise<void>,
  signal?: AbortSignal,
): AsyncGenerator<CompletionEvent, void, undefined> {
  const stop = new AbortController();
  const queue: CompletionEvent[] = [];
  let wake: (() => void) | undefined;
  let outcome: { error: unknown } | undefined;
  const done = start(
    (ev) => {
      queue.push(ev);
      wake?.();
    },
    signal !== undefined ? AbortSignal.any([signal, stop.signal]) : stop.signal,
  ).then(
    () => {
      outcome = { error: undefined };
      wake?.();
    },
    (error: unknown) => {
      outcome = { error };
      wake?.();
    },
  );
  try {
    for (;;) {
      const ev = queue.shift();
      if (ev !== undefined) {
        yield ev;
        continue;
      }
      if (outcome !== undefined) {
        if (outcome.error !== undefined) throw outcome.error;
        return;
      }
      await new Promise<void>((resolve) => {
        wake = resolve;
      });
      wake = undefined;
    }
  } finally {
    if (outcome === undefined) stop.abort(new Error('the reader left the stream'));
    await done;
  }
}

/** `POST /completion` events, pulled: {@link pullEvents} over `client.completeInto`. */
export function completeEvents(
  client: LlamaServerClient,
  req: CompletionInput,
  signal?: AbortSignal,
): AsyncGenerator<CompletionEvent, void, undefined> {
  return pullEvents((onEvent, s) => client.completeInto(req, onEvent, s), signal);
}

/** `POST /v1/chat/completions` events, pulled: {@link pullEvents} over `client.chatInto`. */
export function chatEvents(
  client: LlamaServerClient,
  req: ChatInput,
  signal?: AbortSignal,
): AsyncGenerator<CompletionEvent, void, undefined> {
  return pullEvents((onEvent, s) => client.chatInto(req, onEvent, s), signal);
}
