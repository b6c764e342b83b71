// Test-only: reads a /v2 task's event stream as an EventSource does, reconnecting with Last-Event-ID.
import { setTimeout as sleep } from 'node:timers/promises';

export interface Frame {
  id: number;
  event: string;
  data: Record<string, unknown>;
}

/** Parses complete SSE frames out of `buf`; returns them and what is left. */
export function parseFrames(buf: string): { frames: Frame[]; rest: string } {
  const frames: Frame[] = [];
  let at: number;
  while ((at = buf.indexOf('\n\n')) >= 0) {
    const block = buf.slice(0, at);
    buf = buf.slice(at + 2);
    const id = /^id: (\d+)$/m.exec(block)?.[1];
    const event = /^event: (\w+)$/m.exec(block)?.[1];
    const data = /^data: (.*)$/m.exec(block)?.[1];
    if (id !== undefined && event !== undefined && data !== undefined)
      frames.push({ id: Number(id), event, data: JSON.parse(data) as Record<string, unknown> });
  }
  return { frames, rest: buf };
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
        let buf = '';
        const decoder = new TextDecoder();
        for await (const chunk of res.body) {
          const parsed = parseFrames(buf + decoder.decode(chunk as Uint8Array, { stream: true }));
          buf = parsed.rest;
          for (const f of parsed.frames) {
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
