import { formatSseFrame } from '@llama-orch/contracts';
import { describe, expect, it } from 'vitest';
import { frameParser, type Frame } from './task-reader.js';

describe('the test task reader', () => {
  it('reads a token whose text holds U+2028 and U+2029, split across chunks', () => {
    const text =
      formatSseFrame(3, { event: 'token', data: { t: 'a\u2028b\u2029c', i: 0 } }) +
      formatSseFrame(4, { event: 'end', data: { finish_reason: 'length' } as never });
    const frames: Frame[] = [];
    const parser = frameParser((f) => frames.push(f));
    for (let at = 0; at < text.length; at += 7) parser.feed(text.slice(at, at + 7));
    expect(frames).toEqual([
      { id: 3, event: 'token', data: { t: 'a\u2028b\u2029c', i: 0 } },
      { id: 4, event: 'end', data: { finish_reason: 'length' } },
    ]);
  });
});
