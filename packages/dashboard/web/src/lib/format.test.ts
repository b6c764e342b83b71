import { describe, expect, it } from 'vitest';
import { formatAgo, formatBytes, formatClock, formatDuration, formatRate, plural, shortId } from './format.js';

describe('format', () => {
  it('bytes in binary units', () => {
    expect(formatBytes(0)).toBe('0 B');
    expect(formatBytes(512)).toBe('512 B');
    expect(formatBytes(1536)).toBe('1.5 KiB');
    expect(formatBytes(85_520_809_984)).toBe('79.6 GiB');
    expect(formatBytes(200 * 1024 ** 3)).toBe('200 GiB');
    expect(formatBytes(undefined)).toBe('—');
    expect(formatBytes(-1)).toBe('—');
  });

  it('durations from ms to hours', () => {
    expect(formatDuration(0)).toBe('0 ms');
    expect(formatDuration(849.6)).toBe('850 ms');
    expect(formatDuration(1234)).toBe('1.2 s');
    expect(formatDuration(42_400)).toBe('42 s');
    expect(formatDuration(200_000)).toBe('3 min 20 s');
    expect(formatDuration(180_000)).toBe('3 min');
    expect(formatDuration(7_500_000)).toBe('2 h 5 min');
    expect(formatDuration(undefined)).toBe('—');
  });

  it("time ago against the server's clock, from an ISO timestamp or epoch ms", () => {
    const now = Date.parse('2026-11-25T16:00:10.000Z');
    expect(formatAgo('2026-11-25T16:00:10.000Z', now)).toBe('just now');
    expect(formatAgo('2026-11-25T16:00:06.600Z', now)).toBe('3.4 s ago');
    expect(formatAgo(now - 120_000, now)).toBe('2 min ago');
    expect(formatAgo('not a date', now)).toBe('—');
  });

  it('rates, clock, ids and plurals', () => {
    expect(formatRate(12.34)).toBe('12.3 tokens/s');
    expect(formatRate(123.4)).toBe('123 tokens/s');
    expect(formatRate(undefined)).toBe('—');
    expect(formatClock(new Date(2026, 10, 25, 7, 5, 3).getTime())).toBe('07:05:03');
    expect(shortId('0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0')).toBe('0f1e2d3c');
    expect(shortId('t1')).toBe('t1');
    expect(plural(1, 'slot')).toBe('1 slot');
    expect(plural(0, 'slot')).toBe('0 slots');
  });
});
