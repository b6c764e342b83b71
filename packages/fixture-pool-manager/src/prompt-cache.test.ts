import { describe, expect, it } from 'vitest';
import { PromptCache } from './prompt-cache.js';

describe('FIXTURE prompt cache', () => {
  it('reports the longest shared prefix among the last `capacity` prompts', () => {
    const cache = new PromptCache(2);
    expect(cache.take(['a', 'b', 'c'])).toBe(0);
    expect(cache.take(['a', 'b', 'x'])).toBe(2);
    expect(cache.take(['q'])).toBe(0); // evicts [a b c]
    expect(cache.take(['a', 'b', 'c', 'd'])).toBe(2); // only [a b x] is left to share with
    expect(new PromptCache(0).take(['a'])).toBe(0);
  });
});
