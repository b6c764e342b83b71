import { createParser, type EventSourceMessage } from 'eventsource-parser';
import { SseFrameSchema, formatIssues, type SseFrame } from '@llama-orch/contracts';
import { request, type Dispatcher } from 'undici';
import { CliError } from './errors.js';

export interface StreamOptions {
  dispatcher?: Dispatcher;
  headers?: Record<string, string>;
  signal?: AbortSignal;
}

/** Opens a task's SSE stream and yields validated frames as they arrive (no buffering of the answer). */
export async function* streamTask(
  url: string,
  opts: StreamOptions = {},
): AsyncGenerator<SseFrame & { id: string | undefined }> {
  const res = await request(url, {
    method: 'GET',
    headers: { accept: 'text/event-stream', ...opts.headers },
    signal: opts.signal,
    dispatcher: opts.dispatcher,
  });
  if (res.statusCode !== 200) {
    const body = await res.body.text();
    throw new CliError(`stream ${url} answered ${res.statusCode}: ${body.slice(0, 200).replace(/\s+/g, ' ')}`);
  }
  const queue: EventSourceMessage[] = [];
  const parser = createParser({ onEvent: (e) => queue.push(e) });
  const decoder = new TextDecoder();
  for await (const chunk of res.body) {
    parser.feed(decoder.decode(chunk as Buffer, { stream: true }));
    while (queue.length > 0) {
      const e = queue.shift()!;
      const frame = SseFrameSchema.safeParse({ event: e.event, data: safeJson(e.data) });
      if (!frame.success)
        throw new CliError(
          `unexpected '${e.event ?? 'message'}' event on the stream (${formatIssues(frame.error).split('\n').join('; ')})`,
        );
      yield { ...frame.data, id: e.id };
      if (frame.data.event === 'end' || frame.data.event === 'error') return;
    }
  }
  throw new CliError('stream closed before a terminal event');
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}
