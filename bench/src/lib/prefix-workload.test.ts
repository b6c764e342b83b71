import { describe, expect, it } from 'vitest';
import { prng } from './chat.js';
import {
  chatRound,
  failedWhereServed,
  poissonOffsets,
  summarizeChats,
  summarizeLoad,
  tenantRound,
  CONVERSATIONS,
  TENANTS,
  type ChatTurnRecord,
  type PrefixRecord,
} from './prefix-workload.js';

describe('poissonOffsets', () => {
  it('starts at 0, never goes back, and has a mean gap of 1/rate', () => {
    const xs = poissonOffsets(prng(1), 4, 20_000);
    expect(xs[0]).toBe(0);
    expect(xs.every((x, i) => i === 0 || x >= (xs[i - 1] as number))).toBe(true);
    const meanGapMs = (xs.at(-1) as number) / (xs.length - 1);
    expect(meanGapMs).toBeGreaterThan(245);
    expect(meanGapMs).toBeLessThan(255);
  });

  it('has exponential gaps: about 1/e of them longer than the mean', () => {
    const xs = poissonOffsets(prng(2), 1, 20_000);
    const gaps = xs.slice(1).map((x, i) => x - (xs[i] as number));
    const longer = gaps.filter((g) => g > 1000).length / gaps.length;
    expect(longer).toBeGreaterThan(0.35);
    expect(longer).toBeLessThan(0.39);
  });

  it('is the same for the same seed', () => {
    expect(poissonOffsets(prng(3), 2, 50)).toEqual(poissonOffsets(prng(3), 2, 50));
  });
});

describe('tenantRound', () => {
  it('gives every variant of a round the same requests and each round fresh texts', () => {
    const a = tenantRound(0, 2, 40);
    expect(tenantRound(0, 2, 40)).toEqual(a);
    const b = tenantRound(1, 2, 40);
    expect(a.systems).toHaveLength(TENANTS);
    expect(b.systems.some((s) => a.systems.includes(s))).toBe(false);
    expect(new Set(a.users).size).toBe(40);
    expect(a.tenants.every((t) => Number.isInteger(t) && t >= 0 && t < TENANTS)).toBe(true);
    expect(new Set(a.systems.map((s) => s.slice(0, 120))).size).toBe(TENANTS);
  });

  it('draws conversations with their own system prompts', () => {
    const w = chatRound(0);
    expect(w.conversations).toHaveLength(CONVERSATIONS);
    expect(new Set(w.conversations.map((c) => c.system)).size).toBe(CONVERSATIONS);
    expect(chatRound(0)).toEqual(w);
  });
});

const rec = (p: Partial<PrefixRecord>): PrefixRecord => ({
  variant: 'least-loaded',
  round: 0,
  index: 0,
  tenant: 0,
  correlation_id: 'c',
  sent_ms: 0,
  ok: true,
  ttft_ms: 100,
  end_ms: 500,
  prompt_tokens: 1000,
  cached_tokens: 0,
  ...p,
});

describe('summarizeLoad', () => {
  it('sums cached over prompt tokens, counts throughput over each block and success over sent', () => {
    const records = [
      rec({ index: 0, tenant: 1, cached_tokens: 0, pool_id: 'p1', sent_ms: 0, end_ms: 1000 }),
      rec({ index: 1, tenant: 1, cached_tokens: 900, pool_id: 'p2', sent_ms: 100, end_ms: 1500 }),
      rec({ index: 2, tenant: 2, ok: false, ttft_ms: Number.NaN, prompt_tokens: 0, sent_ms: 200, end_ms: 300 }),
      rec({ round: 1, index: 0, tenant: 1, cached_tokens: 0, pool_id: 'p1', sent_ms: 0, end_ms: 500 }),
      rec({ variant: 'cache-aware', cached_tokens: 1000 }),
    ];
    const s = summarizeLoad(records, 'least-loaded');
    expect(s.sent).toBe(4);
    expect(s.completed).toBe(3);
    expect(s.successRate).toBe(0.75);
    expect(s.cachedShare).toBeCloseTo(900 / 3000);
    // each tenant's first request of a round left out
    expect(s.cachedShareWarm).toBeCloseTo(0.9);
    // 3 completed over 1.5 s + 0.5 s
    expect(s.throughputPerS).toBeCloseTo(1.5);
    expect(s.perPool).toEqual({ p1: 2, p2: 1 });
    // round 0 tenant 1: 2 pools; round 1 tenant 1: 1 pool
    expect(s.poolsPerTenant).toBe(1.5);
    expect(s.ttftHit.n).toBe(1);
    expect(s.ttftMiss.n).toBe(2);
  });

  it('counts the requests one variant failed that the other served', () => {
    const records = [
      rec({ variant: 'least-loaded', index: 0 }),
      rec({ variant: 'least-loaded', index: 1 }),
      rec({ variant: 'least-loaded', index: 2, ok: false }),
      rec({ variant: 'cache-aware', index: 0, ok: false }),
      rec({ variant: 'cache-aware', index: 1 }),
      rec({ variant: 'cache-aware', index: 2, ok: false }),
    ];
    expect(failedWhereServed(records, 'cache-aware', 'least-loaded')).toBe(1);
    expect(failedWhereServed(records, 'least-loaded', 'cache-aware')).toBe(0);
  });
});

describe('summarizeChats', () => {
  const turn = (p: Partial<ChatTurnRecord>): ChatTurnRecord => ({
    variant: 'affinity',
    round: 0,
    conversation: 0,
    turn: 1,
    correlation_id: 'c',
    ok: true,
    ttft_ms: 100,
    prompt_tokens: 500,
    cached_tokens: 0,
    completion_tokens: 16,
    ...p,
  });

  it("counts at most the previous turn's prompt and answer as cached, over turns 2+", () => {
    const s = summarizeChats(
      [
        turn({ turn: 1, pool_id: 'a' }),
        turn({ turn: 2, prompt_tokens: 1000, cached_tokens: 600, ttft_ms: 50, pool_id: 'a' }),
        turn({ turn: 3, prompt_tokens: 1500, cached_tokens: 0, ttft_ms: 300, pool_id: 'b' }),
      ],
      'affinity',
    );
    expect(s.turns).toBe(2);
    expect(s.priorCachedShare).toBeCloseTo(516 / (516 + 1016));
    expect(s.samePoolShare).toBe(0.5);
    expect(s.ttft.p50).toBe(50);
  });
});
