import { describe, expect, it } from 'vitest';
import { parseSseData } from './sse-parser.js';

async function collect(chunks: Array<string | Uint8Array>): Promise<string[]> {
  async function* gen(): AsyncGenerator<string | Uint8Array> {
    for (const c of chunks) yield c;
  }
  const out: string[] = [];
  for await (const d of parseSseData(gen())) out.push(d);
  return out;
}

describe('parseSseData', () => {
  it('yields each data payload and skips comment pings', async () => {
    const out = await collect(['data: {"a":1}\n\n:\n\ndata: {"b":2}\n\n']);
    expect(out).toEqual(['{"a":1}', '{"b":2}']);
  });

  it('reassembles frames and UTF-8 sequences split across chunks', async () => {
    const bytes = new TextEncoder().encode('data: {"content":"énd"}\n\ndata: x\r\n\r\n');
    const chunks = Array.from(bytes, (b) => Uint8Array.of(b));
    expect(await collect(chunks)).toEqual(['{"content":"énd"}', 'x']);
  });

  it('joins multi-line data and ignores other fields', async () => {
    expect(await collect(['event: e\nid: 3\ndata: a\ndata: b\n\n'])).toEqual(['a\nb']);
  });

  it('drops an event cut before its blank line', async () => {
    expect(await collect(['data: one\n\ndata: {"partial"'])).toEqual(['one']);
  });
});
