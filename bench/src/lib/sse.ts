/**
 * Minimal incremental SSE parser (`id:`, `event:`, `data:` lines, `:` comments, blank line ends a
 * frame). Kept local and allocation-light because the stream benchmarks parse tens of thousands
 * of frames per second in one process; it stamps nothing itself, callers time chunk arrival.
 */
export interface SseFrame {
  id: string | undefined;
  event: string;
  data: string;
}

export class SseParser {
  #buf = '';
  #id: string | undefined;
  #event = '';
  #data: string[] = [];

  /** Feeds a chunk; returns the frames it completed. */
  feed(chunk: string): SseFrame[] {
    const out: SseFrame[] = [];
    this.#buf += chunk;
    let start = 0;
    for (;;) {
      const nl = this.#buf.indexOf('\n', start);
      if (nl < 0) break;
      let line = this.#buf.slice(start, nl);
      start = nl + 1;
      if (line.endsWith('\r')) line = line.slice(0, -1);
      if (line === '') {
        if (this.#data.length > 0 || this.#event !== '') {
          out.push({ id: this.#id, event: this.#event === '' ? 'message' : this.#event, data: this.#data.join('\n') });
        }
        this.#event = '';
        this.#data = [];
        continue;
      }
      if (line.startsWith(':')) continue;
      const colon = line.indexOf(':');
      const field = colon < 0 ? line : line.slice(0, colon);
      let value = colon < 0 ? '' : line.slice(colon + 1);
      if (value.startsWith(' ')) value = value.slice(1);
      if (field === 'data') this.#data.push(value);
      else if (field === 'event') this.#event = value;
      else if (field === 'id') this.#id = value;
    }
    this.#buf = this.#buf.slice(start);
    return out;
  }
}
