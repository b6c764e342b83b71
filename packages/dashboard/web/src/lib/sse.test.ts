import { describe, expect, it } from 'vitest';
import { readSse, type SseEvent } from './sse.js';

/** A body that delivers `parts` as separate chunks (so frames and even characters split across reads). */
function body(parts: Array<string | Uint8Array>): ReadableStream<Uint8Array> {
  const enc = new TextEncoder();
  return new ReadableStream({
    start(controller) {
      for (const p of parts) controller.enqueue(typeof p === 'string' ? enc.encode(p) : p);
      controller.close();
    },
  });
}

async function collect(parts: Array<string | Uint8Array>): Promise<{ events: SseEvent[]; comments: string[] }> {
  const events: SseEvent[] = [];
  const comments: string[] = [];
  await readSse(body(parts), { onEvent: (e) => events.push(e), onComment: (c) => comments.push(c) });
  return { events, comments };
}

describe('readSse', () => {
  it('parses named events, data-only frames and comments', async () => {
    const { events, comments } = await collect([
      ': keep-alive\n\n',
      'event: snapshot\ndata: {"a":1}\n\n',
      'data: [DONE]\n\n',
    ]);
    expect(events).toEqual([
      { event: 'snapshot', data: '{"a":1}', id: undefined },
      { event: undefined, data: '[DONE]', id: undefined },
    ]);
    expect(comments).toEqual(['keep-alive']);
  });

  it('reassembles frames split across chunks, CRLF line ends and multi-line data', async () => {
    const { events } = await collect([
      'id: 7\r\nev',
      'ent: tok',
      'en\r\ndata: line one\r\n',
      'data: line two\r\n',
      '\r\n',
    ]);
    expect(events).toEqual([{ id: '7', event: 'token', data: 'line one\nline two' }]);
  });

  it('decodes a multi-byte character split between two chunks', async () => {
    const bytes = new TextEncoder().encode('data: naïve ☃\n\n');
    const cut = bytes.indexOf(0xe2) + 1; // inside the snowman's three bytes
    const { events } = await collect([bytes.slice(0, cut), bytes.slice(cut)]);
    expect(events.map((e) => e.data)).toEqual(['naïve ☃']);
  });

  it('drops an unterminated last frame (the server went away mid-frame)', async () => {
    const { events } = await collect(['data: whole\n\n', 'data: half']);
    expect(events.map((e) => e.data)).toEqual(['whole']);
  });

  it("rejects with the handler's error and stops reading", async () => {
    const seen: string[] = [];
    const read = readSse(body(['data: 1\n\n', 'data: 2\n\n', 'data: 3\n\n']), {
      onEvent: (e) => {
        seen.push(e.data);
        if (e.data === '2') throw new Error('bad frame');
      },
    });
    await expect(read).rejects.toThrow('bad frame');
    expect(seen).toEqual(['1', '2']);
  });
});
