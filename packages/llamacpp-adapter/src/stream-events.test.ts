import { describe, expect, it } from 'vitest';
import { ChatChunkSchema, CompletionFrameSchema } from './engine-schemas.js';
import { ChatDecoder, plainChatPiece, plainTokenFrame } from './stream-events.js';

describe('plainTokenFrame (token frames checked by hand)', () => {
  const frames: unknown[] = [
    { content: 'a', stop: false },
    { content: '', stop: false, tokens_predicted: 3, id_slot: 0 },
    { content: 'a', stop: false, completion_probabilities: [] },
    { content: 'a', stop: false, tokens_predicted: -1 },
    { content: 'a', stop: false, tokens_predicted: 1.5 },
    { content: 'a', stop: false, completion_probabilities: {} },
    { content: 3, stop: false },
    { content: 'a', stop: 'false' },
    { content: 'a' },
    { content: '', stop: true, tokens_predicted: 1, stop_type: 'eos', timings: { predicted_ms: 1 } },
    { error: { message: 'x' }, content: 'a', stop: false },
    null,
    'a',
    [],
    1,
  ];
  it('accepts only frames the schema accepts as tokens (the rest go to the schema)', () => {
    for (const f of frames) {
      const fast = plainTokenFrame(f);
      if (fast === undefined) continue;
      const parsed = CompletionFrameSchema.safeParse(f);
      expect(parsed.success, JSON.stringify(f)).toBe(true);
      expect(parsed.data?.stop).toBe(false);
      expect(fast.content).toBe((f as { content: string }).content);
    }
    expect(frames.filter((f) => plainTokenFrame(f) !== undefined)).toHaveLength(3);
  });
});

describe('plainChatPiece (chat pieces checked by hand)', () => {
  const head = { created: 1, id: 'chatcmpl-x', model: 'm', system_fingerprint: 'b1', object: 'chat.completion.chunk' };
  const chunk = (choice: unknown, extra: Record<string, unknown> = {}) => ({ choices: [choice], ...head, ...extra });
  const chunks: unknown[] = [
    chunk({ finish_reason: null, index: 0, delta: { content: ' Odkazy' } }),
    chunk({ delta: { content: 'é "q"\n' } }),
    chunk({ finish_reason: null, index: 0, delta: { content: 'a' }, logprobs: null }),
    chunk({ finish_reason: null, index: 0, delta: { role: 'assistant', content: null } }),
    chunk({ finish_reason: null, index: 0, delta: { content: '' } }),
    chunk({ finish_reason: 'stop', index: 0, delta: { content: 'a' } }),
    chunk({ finish_reason: null, index: 0, delta: {} }),
    chunk({ finish_reason: null, index: 0, delta: { content: 'a', tool_calls: [] } }),
    chunk({ finish_reason: null, index: 0, delta: { content: 'a' }, logprobs: { content: [] } }),
    chunk({ finish_reason: null, index: 0.5, delta: { content: 'a' } }),
    chunk({ finish_reason: 3, index: 0, delta: { content: 'a' } }),
    chunk({ finish_reason: null, index: 0, delta: { content: 7 } }),
    chunk({ finish_reason: null, index: 0, delta: 'a' }),
    chunk(
      { finish_reason: null, index: 0, delta: { content: 'a' } },
      { usage: { completion_tokens: 1, prompt_tokens: 1 }, timings: { predicted_ms: 1 } },
    ),
    chunk({ finish_reason: null, index: 0, delta: { content: 'a' } }, { timings: { predicted_ms: -1 } }),
    chunk({ finish_reason: null, index: 0, delta: { content: 'a' } }, { error: { message: 'x' } }),
    { choices: [], ...head },
    { choices: [{ delta: { content: 'a' } }, { delta: { content: 'b' } }], ...head },
    { choices: 'a', ...head },
    null,
    'a',
    [],
    1,
  ];

  it('accepts only chunks the schema accepts, as the content piece the general path makes of them', () => {
    for (const c of chunks) {
      const fast = plainChatPiece(c);
      if (fast === undefined) continue;
      const parsed = ChatChunkSchema.safeParse(c);
      expect(parsed.success, JSON.stringify(c)).toBe(true);
      expect(fast).toBe((c as { choices: Array<{ delta: { content: string } }> }).choices[0]!.delta.content);
    }
    expect(chunks.filter((c) => plainChatPiece(c) !== undefined)).toHaveLength(3);
  });

  it('the decoder gives the same events with the fast path as the schema path gives', () => {
    const d = new ChatDecoder('http://engine');
    const events = [
      chunk({ finish_reason: null, index: 0, delta: { role: 'assistant', content: null } }),
      chunk({ finish_reason: null, index: 0, delta: { content: 'Hi' } }),
      chunk({ finish_reason: null, index: 0, delta: { content: ' there' }, logprobs: null }),
      chunk({ finish_reason: 'length', index: 0, delta: {} }),
      {
        choices: [],
        ...head,
        usage: { completion_tokens: 2, prompt_tokens: 5, prompt_tokens_details: { cached_tokens: 1 } },
        timings: { predicted_ms: 3 },
      },
    ].map((c) => d.payload(JSON.stringify(c)));
    expect(events).toEqual([
      undefined,
      { type: 'token', t: 'Hi', i: 0 },
      { type: 'token', t: ' there', i: 1 },
      undefined,
      undefined,
    ]);
    expect(d.payload('[DONE]')).toEqual({
      type: 'end',
      tokens_out: 2,
      decode_ms: 3,
      prompt_tokens: 5,
      cached_tokens: 1,
      stop_type: 'limit',
      finish_reason: 'length',
    });
  });
});
