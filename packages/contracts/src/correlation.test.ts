import { describe, expect, it } from 'vitest';
import { isCorrelationId } from './correlation.js';

describe('isCorrelationId', () => {
  it('accepts UUIDs and URL-safe tokens up to 128 characters', () => {
    expect(isCorrelationId('0b4f7f3e-6d1c-4c1e-9a51-2f7c1f0e8d11')).toBe(true);
    expect(isCorrelationId('req:42/a+b=c@d.e_f')).toBe(true);
    expect(isCorrelationId('x'.repeat(128))).toBe(true);
  });
  it('refuses empty, overlong, spaced or non-string values', () => {
    expect(isCorrelationId('')).toBe(false);
    expect(isCorrelationId('x'.repeat(129))).toBe(false);
    expect(isCorrelationId('a b')).toBe(false);
    expect(isCorrelationId('line\nbreak')).toBe(false);
    expect(isCorrelationId(['a'])).toBe(false);
    expect(isCorrelationId(undefined)).toBe(false);
  });
});
