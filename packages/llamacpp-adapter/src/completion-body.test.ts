import { describe, expect, it } from 'vitest';
import { DEFAULT_TEMPERATURE, toCompletionBody } from './completion-body.js';

describe('toCompletionBody', () => {
  it('maps a greedy seeded dispatch with a fixed key order', () => {
    const body = toCompletionBody({ prompt: 'Once upon a time', max_tokens: 16, seed: 42, greedy: true, temperature: 1.3 });
    expect(JSON.stringify(body)).toBe('{"prompt":"Once upon a time","n_predict":16,"stream":true,"cache_prompt":false,"seed":42,"temperature":0}');
  });

  it('omits seed when absent and uses the given or default temperature', () => {
    expect(toCompletionBody({ prompt: 'p', max_tokens: 1 })).toEqual({
      prompt: 'p', n_predict: 1, stream: true, cache_prompt: false, temperature: DEFAULT_TEMPERATURE,
    });
    expect(toCompletionBody({ prompt: 'p', max_tokens: 1, greedy: false, temperature: 0.2 }).temperature).toBe(0.2);
    expect('seed' in toCompletionBody({ prompt: 'p', max_tokens: 1 })).toBe(false);
  });
});
