/**
 * Push parser for the `text/event-stream` bodies of llama-server: feed it the body's chunks as they
 * arrive and it hands over the `data` payload of each complete event (multi-line `data:` joined
 * with `\n`), synchronously, in order. Comment lines (`:` pings, reference §4.2) and the
 * `event:`/`id:`/`retry:` fields, which the engine never sends, are skipped. Bytes are decoded in
 * streaming mode, so a UTF-8 sequence split across chunks stays intact.
 *
 * Performance notes: push SSE splitter. No generator, promise or line array per event: one
 * decode per chunk, one slice per line.
 */
export class SseSplitter {
  readonly #decoder = new TextDecoder('utf-8');
  #buffer = '';
  /** `data` lines of the event being read; a single-line event never allocates the array. */
  #first: string | undefined;
  #more: string[] | undefined;

  /**
   * Feeds one chunk; `onPayload` gets every payload it completes and returns false to stop (the
   * rest of the chunk is then dropped: the caller is abandoning the stream).
   */
  feed(chunk: Uint8Array | string, onPayload: (payload: string) => boolean | void): boolean {
    this.#buffer += typeof chunk === 'string' ? chunk : this.#decoder.decode(chunk, { stream: true });
    return this.#drain(onPayload, false);
  }

  /** The body ended: flushes the decoder and a last line without its newline. An event without its blank line is dropped. */
  end(onPayload: (payload: string) => boolean | void): boolean {
    this.#buffer += this.#decoder.decode();
    return this.#drain(onPayload, true);
  }

  #drain(onPayload: (payload: string) => boolean | void, final: boolean): boolean {
    const buf = this.#buffer;
    let start = 0;
    let nl = buf.indexOf('\n');
    while (nl >= 0) {
      const end = nl > start && buf.charCodeAt(nl - 1) === 13 ? nl - 1 : nl;
      const payload = this.#line(buf, start, end);
      start = nl + 1;
      nl = buf.indexOf('\n', start);
      if (payload !== undefined && onPayload(payload) === false) {
        this.#buffer = '';
        return false;
      }
    }
    this.#buffer = start === 0 ? buf : buf.slice(start);
    if (final && this.#buffer.length > 0) {
      const rest = this.#buffer;
      this.#buffer = '';
      const end = rest.charCodeAt(rest.length - 1) === 13 ? rest.length - 1 : rest.length;
      const payload = this.#line(rest, 0, end);
      if (payload !== undefined && onPayload(payload) === false) return false;
    }
    return true;
  }

  /** One line `buf[start, end)`; returns the event's payload when the line is the blank line ending it. */
  #line(buf: string, start: number, end: number): string | undefined {
    if (end === start) {
      const first = this.#first;
      if (first === undefined) return undefined;
      const payload = this.#more === undefined ? first : [first, ...this.#more].join('\n');
      this.#first = undefined;
      this.#more = undefined;
      return payload;
    }
    if (buf.charCodeAt(start) === 58 /* ':' */) return undefined;
    if (buf.startsWith('data:', start)) {
      const from = buf.charCodeAt(start + 5) === 32 /* ' ' */ ? start + 6 : start + 5;
      const value = buf.slice(from, end);
      if (this.#first === undefined) this.#first = value;
      else (this.#more ??= []).push(value);
      return undefined;
    }
    // A field without a colon is a field name with an empty value; only `data` matters.
    if (end - start === 4 && buf.startsWith('data', start)) {
      if (this.#first === undefined) this.#first = '';
      else (this.#more ??= []).push('');
    }
    return undefined;
  }
}
