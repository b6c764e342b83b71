import { createParser, type EventSourceMessage } from 'eventsource-parser';
import { request } from 'undici';

/** One SSE frame as the client saw it. */
export interface RecordedFrame {
  received_at: number;
  id: string | undefined;
  event: string;
  data: Record<string, unknown>;
}

/**
 * Reads an SSE stream incrementally, recording every frame with its arrival time, until the server
 * closes the connection (orchestratord closes a task's stream after its terminal frame). Nothing is
 * dropped: a second terminal frame or a token after `end` is in `frames` for the caller to see.
 * `closedWithoutTerminal`: the connection closed and no frame was `end` / `error`. `onFrame` may
 * abort via `opts.signal`; the frames read until then are returned.
 */
export async function recordStream(
  url: string,
  headers: Record<string, string>,
  opts: { signal?: AbortSignal; onFrame?: (f: RecordedFrame) => void } = {},
): Promise<{ frames: RecordedFrame[]; status: number; closedWithoutTerminal: boolean }> {
  const res = await request(url, {
    method: 'GET',
    headers: { accept: 'text/event-stream', ...headers },
    signal: opts.signal,
  });
  const frames: RecordedFrame[] = [];
  if (res.statusCode !== 200) {
    await res.body.text();
    return { frames, status: res.statusCode, closedWithoutTerminal: false };
  }
  const pending: EventSourceMessage[] = [];
  const parser = createParser({ onEvent: (e) => pending.push(e) });
  const decoder = new TextDecoder();
  try {
    for await (const chunk of res.body) {
      parser.feed(decoder.decode(chunk as Buffer, { stream: true }));
      for (const e of pending.splice(0)) {
        const frame: RecordedFrame = {
          received_at: Date.now(),
          id: e.id,
          event: e.event ?? 'message',
          data: JSON.parse(e.data) as Record<string, unknown>,
        };
        frames.push(frame);
        opts.onFrame?.(frame);
      }
    }
  } catch (err) {
    if (!opts.signal?.aborted) throw err;
  }
  return { frames, status: 200, closedWithoutTerminal: !frames.some((f) => f.event === 'end' || f.event === 'error') };
}

/** Sends a `/completion` request straight to a llama-server and returns its text and token count. */
export async function directCompletion(
  engineUrl: string,
  body: Record<string, unknown>,
): Promise<{ text: string; tokensPredicted: number; pieces: string[] }> {
  const res = await request(new URL('/completion', engineUrl), {
    method: 'POST',
    headers: { 'content-type': 'application/json', connection: 'close' },
    body: JSON.stringify(body),
  });
  if (res.statusCode !== 200) throw new Error(`engine answered ${res.statusCode}: ${await res.body.text()}`);
  const pieces: string[] = [];
  let tokensPredicted = -1;
  const parser = createParser({
    onEvent: (e) => {
      const data = JSON.parse(e.data) as { content?: string; stop?: boolean; tokens_predicted?: number };
      if (data.content) pieces.push(data.content);
      if (data.stop) tokensPredicted = data.tokens_predicted ?? -1;
    },
  });
  const decoder = new TextDecoder();
  for await (const chunk of res.body) parser.feed(decoder.decode(chunk as Buffer, { stream: true }));
  if (tokensPredicted < 0) throw new Error('engine stream ended without stop:true');
  return { text: pieces.join(''), tokensPredicted, pieces };
}
