import { createParser, type EventSourceMessage } from 'eventsource-parser';
import { SseFrameSchema, type SseFrame } from '@llama-orch/contracts';
import { request, type Dispatcher } from 'undici';
import { CliError } from './errors.js';

export interface StreamOptions {
  dispatcher?: Dispatcher;
  headers?: Record<string, string>;
  signal?: AbortSignal;
}

/** Opens a task's SSE stream and yields validated frames as they arrive (no buffering of the answer). */
export async function* streamTask(url: string, opts: StreamOptions = {}): AsyncGenerator<SseFrame & { id: string | undefined }> {
  const res = await request(url, {
    method: 'GET',
    headers: { accept: 'text/event-stream', ...opts.headers },
    signal: opts.signal,
    dispatcher: opts.dispatcher,
  });
  if (res.statusCode !== 200) {
    const body = await res.body.text();
    throw new CliError(`stream ${url} answered ${res.statusCode}: ${body}`);
  }
  const queue: EventSourceMessage[] = [];
  const parser = createParser({ onEvent: (e) => queue.push(e) });
  const decoder = new TextDecoder();
  for await (const chunk of res.body) {
    parser.feed(decoder.decode(chunk as Buffer, { stream: true }));
    while (queue.length > 0) {
      const e = queue.shift()!;
      const frame = SseFrameSchema.parse({ event: e.event, data: JSON.parse(e.data) });
      yield { ...frame, id: e.id };
      if (frame.event === 'end' || frame.event === 'error') return;
    }
  }
  throw new CliError('stream closed before a terminal event');
}
