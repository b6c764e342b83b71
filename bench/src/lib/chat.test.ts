import { describe, expect, it } from 'vitest';
import { ChatStreamReader, priorCachedShare, prng, userText } from './chat.js';

const chunk = (body: object): string => `data: ${JSON.stringify(body)}\n\n`;
const base = { id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'm' };

describe('ChatStreamReader', () => {
  it('times the first chunk with content (not the role chunk) and reads usage from the last chunk', () => {
    const r = new ChatStreamReader();
    const stream = [
      chunk({ ...base, choices: [{ index: 0, delta: { role: 'assistant', content: null }, finish_reason: null }] }),
      chunk({ ...base, choices: [{ index: 0, delta: { content: 'Hel' }, finish_reason: null }] }),
      chunk({ ...base, choices: [{ index: 0, delta: { content: 'lo' }, finish_reason: null }] }),
      chunk({ ...base, choices: [{ index: 0, delta: {}, finish_reason: 'length' }] }),
      chunk({
        ...base,
        choices: [],
        usage: {
          prompt_tokens: 900,
          completion_tokens: 2,
          total_tokens: 902,
          prompt_tokens_details: { cached_tokens: 850 },
        },
      }),
      'data: [DONE]\n\n',
    ];
    const done = stream.map((s, i) => r.feed(s, 10 + i));
    expect(done.at(-1)).toBe(true);
    expect(r.result(5, 20)).toEqual({
      sentAt: 5,
      firstTokenAt: 11,
      endAt: 20,
      text: 'Hello',
      finishReason: 'length',
      promptTokens: 900,
      completionTokens: 2,
      cachedTokens: 850,
    });
  });

  it('refuses a stream without [DONE] or without usage', () => {
    const r = new ChatStreamReader();
    r.feed(chunk({ ...base, choices: [{ index: 0, delta: { content: 'x' }, finish_reason: 'stop' }] }), 1);
    expect(() => r.result(0, 2)).toThrow(/without data: \[DONE\]/);
    r.feed('data: [DONE]\n\n', 2);
    expect(() => r.result(0, 2)).toThrow(/no usage chunk/);
  });
});

describe('conversation text', () => {
  it('is the same for the same seed and differs between seeds', () => {
    expect(userText(prng(7), 20)).toBe(userText(prng(7), 20));
    expect(userText(prng(7), 20)).not.toBe(userText(prng(8), 20));
    expect(userText(prng(1), 200).split(' ').length).toBe(204);
  });

  it('counts at most the prior conversation as cached', () => {
    expect(priorCachedShare(450, { promptTokens: 480, completionTokens: 20 })).toBe(0.9);
    expect(priorCachedShare(900, { promptTokens: 480, completionTokens: 20 })).toBe(1);
    expect(priorCachedShare(0, { promptTokens: 0, completionTokens: 0 })).toBe(0);
  });
});
