import { describe, expect, it } from 'vitest';
import { GaussianStream, Xoshiro128ss, f32ToF16Bits } from './prng.js';

describe('xoshiro128**', () => {
  it('matches the reference sequence from state {1, 2, 3, 4}', () => {
    const g = Xoshiro128ss.fromState([1, 2, 3, 4]);
    expect([g.next(), g.next(), g.next()]).toEqual([11520, 0, 5927040]);
  });

  it('is deterministic per seed and differs between seeds', () => {
    const a = new Xoshiro128ss(42);
    const b = new Xoshiro128ss(42);
    const c = new Xoshiro128ss(43);
    const sa = Array.from({ length: 8 }, () => a.next());
    expect(Array.from({ length: 8 }, () => b.next())).toEqual(sa);
    expect(Array.from({ length: 8 }, () => c.next())).not.toEqual(sa);
  });
});

describe('Box–Muller stream', () => {
  it('has mean 0 and the requested spread', () => {
    const g = new GaussianStream(7, 0.02);
    const xs = new Float32Array(200_000);
    g.fill(xs);
    const mean = xs.reduce((s, v) => s + v, 0) / xs.length;
    const std = Math.sqrt(xs.reduce((s, v) => s + (v - mean) ** 2, 0) / xs.length);
    expect(Math.abs(mean)).toBeLessThan(0.0005);
    expect(std).toBeCloseTo(0.02, 3);
  });

  it('gives each tensor its own stream', () => {
    expect(GaussianStream.seedFor(42, 'blk.0.attn_q.weight')).not.toBe(
      GaussianStream.seedFor(42, 'blk.0.attn_k.weight'),
    );
    expect(GaussianStream.seedFor(42, 'x')).not.toBe(GaussianStream.seedFor(43, 'x'));
  });
});

describe('f32 → f16', () => {
  it.each([
    [0, 0x0000],
    [-0, 0x8000],
    [1, 0x3c00],
    [-2, 0xc000],
    [0.1, 0x2e66],
    [65504, 0x7bff],
    [65520, 0x7c00],
    [Infinity, 0x7c00],
    [-Infinity, 0xfc00],
    [2 ** -24, 0x0001],
    [2 ** -25, 0x0000],
    [3 * 2 ** -25, 0x0002],
    [2 ** -14, 0x0400],
    [1 + 2 ** -11, 0x3c00],
    [1 + 3 * 2 ** -11, 0x3c02],
    [0.333333343267, 0x3555],
  ])('%d → %s', (v, bits) => {
    expect(f32ToF16Bits(v)).toBe(bits);
  });

  it('maps NaN to a NaN', () => {
    const b = f32ToF16Bits(NaN);
    expect(b & 0x7c00).toBe(0x7c00);
    expect(b & 0x3ff).not.toBe(0);
  });
});
