import { describe, expect, it } from 'vitest';
import { CompletionFrameSchema } from './engine-schemas.js';
import { plainTokenFrame } from './stream-events.js';

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
    null, 'a', [], 1,
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
