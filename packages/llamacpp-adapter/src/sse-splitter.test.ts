import { describe, expect, it } from 'vitest';
import { SseSplitter } from './sse-splitter.js';

function split(chunks: Array<string | Uint8Array>): string[] {
  const s = new SseSplitter();
  const out: string[] = [];
  for (const c of chunks) s.feed(c, (p) => void out.push(p));
  s.end((p) => void out.push(p));
  return out;
}

describe('SseSplitter', () => {
  it('hands over each payload synchronously, skipping pings and other fields', () => {
    expect(split(['data: {"a":1}\n\n:\n\nevent: e\nid: 3\ndata: a\ndata: b\n\ndata\n\ndata:x\n\n'])).toEqual([
      '{"a":1}',
      'a\nb',
      '',
      'x',
    ]);
  });

  it('reassembles payloads, CRLF and UTF-8 split byte by byte', () => {
    const bytes = new TextEncoder().encode('data: {"content":"énd"}\r\n\r\ndata: y\n\n');
    expect(split(Array.from(bytes, (b) => Uint8Array.of(b)))).toEqual(['{"content":"énd"}', 'y']);
  });

  it('drops an event cut before its blank line; takes a last line without newline', () => {
    expect(split(['data: one\n\ndata: {"partial"'])).toEqual(['one']);
    expect(split(['data: one\n\ndata: two\n'])).toEqual(['one']);
  });

  it('stops when the callback returns false', () => {
    const s = new SseSplitter();
    const out: string[] = [];
    expect(s.feed('data: 1\n\ndata: 2\n\n', (p) => (out.push(p), false))).toBe(false);
    expect(out).toEqual(['1']);
  });
});
