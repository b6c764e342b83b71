/**
 * Incremental parser for the `text/event-stream` bodies of llama-server. It yields the `data`
 * payload of each event (multi-line `data:` joined with `\n`), skips comment lines (`:` pings,
 * reference §4.2) and ignores `event:`/`id:`/`retry:` fields, which `/completion` never sends.
 * Bytes are decoded in streaming mode so a UTF-8 sequence split across chunks stays intact.
 */
export async function* parseSseData(chunks: AsyncIterable<Uint8Array | string>): AsyncGenerator<string> {
  const decoder = new TextDecoder('utf-8');
  let buffer = '';
  let data: string[] = [];
  const takeLines = function* (final: boolean): Generator<string> {
    for (;;) {
      const nl = buffer.indexOf('\n');
      if (nl < 0) break;
      let line = buffer.slice(0, nl);
      buffer = buffer.slice(nl + 1);
      if (line.endsWith('\r')) line = line.slice(0, -1);
      yield line;
    }
    if (final && buffer.length > 0) {
      const line = buffer;
      buffer = '';
      yield line;
    }
  };
  const onLine = (line: string): string | undefined => {
    if (line === '') {
      if (data.length === 0) return undefined;
      const payload = data.join('\n');
      data = [];
      return payload;
    }
    if (line.startsWith(':')) return undefined;
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'data') data.push(value);
    return undefined;
  };
  for await (const chunk of chunks) {
    buffer += typeof chunk === 'string' ? chunk : decoder.decode(chunk, { stream: true });
    for (const line of takeLines(false)) {
      const payload = onLine(line);
      if (payload !== undefined) yield payload;
    }
  }
  buffer += decoder.decode();
  for (const line of takeLines(true)) {
    const payload = onLine(line);
    if (payload !== undefined) yield payload;
  }
  // An event without its terminating blank line is incomplete by the SSE rules; dropped on purpose,
  // the caller decides from the frames it did get whether the stream finished.
}
