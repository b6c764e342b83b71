import { describe, expect, it } from 'vitest';
import { firstTokenDelayMs, tokenLine, tokenText } from './token-text.js';

describe('FIXTURE token text', () => {
  it('writes the line JSON.stringify would, for both token texts', () => {
    for (const t of [tokenText('words', 7), tokenText('clock', 7)]) {
      expect(tokenLine(t, 7)).toBe(`${JSON.stringify({ type: 'token', t, i: 7 })}\n`);
    }
  });

  it('words are tok{i} after one full interval; clock is the send time after a fraction of it', () => {
    expect(tokenText('words', 3)).toBe('tok3 ');
    expect(firstTokenDelayMs('words', 20)).toBe(20);
    const before = process.hrtime.bigint();
    expect(BigInt(tokenText('clock', 0)) >= before).toBe(true);
    for (let n = 0; n < 100; n++) {
      const d = firstTokenDelayMs('clock', 20);
      expect(d >= 0 && d < 20).toBe(true);
    }
  });
});
