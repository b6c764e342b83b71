/**
 * Deterministic number generation for synthetic weights. Everything here is plain integer
 * arithmetic plus `Math.log/cos/sin/sqrt`, so the same parameters give the same bytes.
 */

/** FNV-1a over UTF-8 bytes: mixes a tensor's name into its stream seed. */
export function fnv1a32(text: string): number {
  let h = 0x811c9dc5;
  for (const b of Buffer.from(text, 'utf8')) h = Math.imul(h ^ b, 0x01000193);
  return h >>> 0;
}

function splitmix32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x9e3779b9) >>> 0;
    let z = a;
    z = Math.imul(z ^ (z >>> 16), 0x21f0aaad);
    z = Math.imul(z ^ (z >>> 15), 0x735a2d97);
    return (z ^ (z >>> 15)) >>> 0;
  };
}

const rotl = (x: number, k: number): number => ((x << k) | (x >>> (32 - k))) >>> 0;

/** xoshiro128** (Blackman & Vigna), state seeded by splitmix32. */
export class Xoshiro128ss {
  private s0: number;
  private s1: number;
  private s2: number;
  private s3: number;
  constructor(seed: number) {
    const sm = splitmix32(seed);
    this.s0 = sm();
    this.s1 = sm();
    this.s2 = sm();
    this.s3 = sm();
    // the all-zero state is a fixed point
    if ((this.s0 | this.s1 | this.s2 | this.s3) === 0) this.s0 = 1;
  }

  /** A generator with an explicit state (reference vectors). */
  static fromState(state: readonly [number, number, number, number]): Xoshiro128ss {
    const g = new Xoshiro128ss(0);
    [g.s0, g.s1, g.s2, g.s3] = state.map((v) => v >>> 0) as [number, number, number, number];
    return g;
  }

  /** Next unsigned 32-bit value. */
  next(): number {
    const result = Math.imul(rotl(Math.imul(this.s1, 5) >>> 0, 7), 9) >>> 0;
    const t = (this.s1 << 9) >>> 0;
    this.s2 = (this.s2 ^ this.s0) >>> 0;
    this.s3 = (this.s3 ^ this.s1) >>> 0;
    this.s1 = (this.s1 ^ this.s2) >>> 0;
    this.s0 = (this.s0 ^ this.s3) >>> 0;
    this.s2 = (this.s2 ^ t) >>> 0;
    this.s3 = rotl(this.s3, 11);
    return result;
  }
}

/** N(0, std) samples by Box–Muller over one xoshiro128** stream; keeps the spare of each pair. */
export class GaussianStream {
  private readonly rng: Xoshiro128ss;
  private spare: number | undefined;
  constructor(
    seed: number,
    private readonly std: number,
  ) {
    this.rng = new Xoshiro128ss(seed);
  }

  /** Seed of the stream for one tensor: the model seed mixed with the tensor's name. */
  static seedFor(modelSeed: number, tensorName: string): number {
    return (Math.imul(modelSeed >>> 0, 0x9e3779b1) ^ fnv1a32(tensorName)) >>> 0;
  }

  next(): number {
    if (this.spare !== undefined) {
      const s = this.spare;
      this.spare = undefined;
      return s;
    }
    const u1 = (this.rng.next() + 1) / 4294967296; // (0, 1]: log stays finite
    const u2 = this.rng.next() / 4294967296;
    const r = Math.sqrt(-2 * Math.log(u1));
    const th = 2 * Math.PI * u2;
    this.spare = r * Math.sin(th) * this.std;
    return r * Math.cos(th) * this.std;
  }

  fill(out: Float32Array): void {
    for (let i = 0; i < out.length; i++) out[i] = this.next();
  }
}

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/** IEEE binary32 → binary16 bits, round to nearest even (as numpy's `astype(float16)`). */
export function f32ToF16Bits(value: number): number {
  f32[0] = value;
  const x = u32[0] ?? 0;
  const sign = (x >>> 16) & 0x8000;
  const exp = (x >>> 23) & 0xff;
  let mant = x & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant !== 0 ? 0x200 : 0);
  const e = exp - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00;
  if (e <= 0) {
    if (e < -10) return sign;
    mant |= 0x800000;
    const shift = 14 - e;
    let half = mant >>> shift;
    const rem = mant & ((1 << shift) - 1);
    const halfway = 1 << (shift - 1);
    if (rem > halfway || (rem === halfway && (half & 1) !== 0)) half++;
    return sign | half;
  }
  let half = (e << 10) | (mant >>> 13);
  const rem = mant & 0x1fff;
  // a carry out of the mantissa correctly bumps the exponent (up to infinity)
  if (rem > 0x1000 || (rem === 0x1000 && (half & 1) !== 0)) half++;
  return sign | half;
}
