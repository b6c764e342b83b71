import { describe, expect, it } from 'vitest';
import { countWord, minuteWord } from './minute-words.js';

describe('minuteWord', () => {
  it.each([
    [0, 'zero'],
    [7, 'seven'],
    [13, 'thirteen'],
    [20, 'twenty'],
    [42, 'forty-two'],
    [59, 'fifty-nine'],
  ] as const)('%i → %s', (m, w) => {
    expect(minuteWord(m)).toBe(w);
  });
  it('rejects out-of-range minutes', () => {
    expect(() => minuteWord(60)).toThrow(RangeError);
  });
  it('counts whole words only', () => {
    expect(countWord('Twenty GPUs hum; twenty-one fans', 'twenty')).toBe(1);
    expect(countWord('forty-two, Forty-two', 'forty-two')).toBe(2);
  });
});
