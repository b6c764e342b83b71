import { SseSplitter } from '../sse-splitter.js';

/**
 * Pull form of {@link SseSplitter} for readers that iterate: yields the `data` payload of each
 * event of a `text/event-stream` body (multi-line `data:` joined with `\n`), skipping comment
 * lines and the other fields. An event without its terminating blank line is incomplete by the SSE
 * rules and dropped; the caller decides from the payloads it did get whether the stream finished.
 */
export async function* parseSseData(chunks: AsyncIterable<Uint8Array | string>): AsyncGenerator<string> {
  const splitter = new SseSplitter();
  const ready: string[] = [];
  const take = (payload: string): void => {
    ready.push(payload);
  };
  for await (const chunk of chunks) {
    splitter.feed(chunk, take);
    while (ready.length > 0) yield ready.shift() as string;
  }
  splitter.end(take);
  while (ready.length > 0) yield ready.shift() as string;
}
