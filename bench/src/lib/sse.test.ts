import { describe, expect, it } from 'vitest';
import { SseParser } from './sse.js';

describe('SseParser', () => {
  it('parses frames split across chunks, skipping comments', () => {
    const p = new SseParser();
    const text =
      'id: 0\nevent: started\ndata: {"a":1}\n\n: keep-alive\n\nid: 1\nevent: token\ndata: {"t":"x","i":0}\n\n';
    const frames = [];
    for (let i = 0; i < text.length; i += 7) frames.push(...p.feed(text.slice(i, i + 7)));
    expect(frames).toEqual([
      { id: '0', event: 'started', data: '{"a":1}' },
      { id: '1', event: 'token', data: '{"t":"x","i":0}' },
    ]);
  });

  it("reads llama-server's data-only frames as 'message' events and handles CRLF", () => {
    const frames = new SseParser().feed('data: {"content":"a"}\r\n\r\ndata: {"stop":true}\n\n');
    expect(frames.map((f) => [f.event, f.data])).toEqual([
      ['message', '{"content":"a"}'],
      ['message', '{"stop":true}'],
    ]);
  });
});
