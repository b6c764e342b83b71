// Test-only: reads a /v2 task's event stream as an EventSource does, reconnecting with Last-Event-ID.
import { setTimeout as sleep } from 'node:timers/promises';
import { createParser } from 'eventsource-parser';

export interface Frame {
  id: number;
  event: string;
  data: Record<string, unknown>;
}

/**
 * Feeds SSE text to an eventsource-parser and hands each complete frame to `onFrame`. Lines end
 * only at CR/LF as the SSE spec says: a token's text may hold U+2028, where a `^data: (.*)$`
 * regex would stop, so its JSON would not parse and the reader would reconnect for ever.
 */
export function frameParser(onFrame: (f: Frame) => void): { feed(text: string): void } {
  return createParser({
    onEvent: (e) => {
      if (e.id !== undefined && e.event !== undefined)
        onFrame({ id: Number(e.id), event: e.event, data: JSON.parse(e.data) as Record<string, unknown> });
    },
  });
}

/**
 * A /v2 task's event stream read as an EventSource reads it: from `first`, then through `base`,
 * reconnecting with Last-Event-ID (after 100 ms) whenever the stream ends without a terminal frame
 * or cannot be opened, until the terminal frame. `onFrame` sees every frame as it comes.
 */
export async function readTask(
  base: string,
  id: string,
  headers: Record<string, string>,
  onFrame: (f: Frame) => void,
  first = base,
): Promise<{ frames: Frame[]; reconnects: number }> {
  const frames: Frame[] = [];
  let last: number | undefined;
  let reconnects = -1;
  for (;;) {
    reconnects += 1;
    try {
      const res = await fetch(`${reconnects === 0 ? first : base}/v2/tasks/${id}/events`, {
        headers: { ...headers, ...(last !== undefined ? { 'last-event-id': String(last) } : {}) },
      });
      if (res.status === 200 && res.body !== null) {
        const got: Frame[] = [];
        const parser = frameParser((f) => got.push(f));
        const decoder = new TextDecoder();
        for await (const chunk of res.body) {
          parser.feed(decoder.decode(chunk as Uint8Array, { stream: true }));
          for (const f of got.splice(0)) {
            frames.push(f);
            last = f.id;
            onFrame(f);
            if (f.event === 'end' || f.event === 'error') return { frames, reconnects };
          }
        }
      } else {
        await res.body?.cancel();
      }
    } catch {
      // the stream broke (its replica died): reconnect
    }
    await sleep(100);
  }
}
