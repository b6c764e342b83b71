/**
 * The workloads of `pnpm bench prefix` (issue 41) and their summaries. Pure: texts, arrival times and
 * tenant draws come from seeded PRNGs (the same round gives every variant the same requests at the
 * same times), and the summaries read records only.
 */
import { prng, userText } from './chat.js';
import { summarize, type Summary } from './stats.js';

/** The four variants: a strategy, with or without `user`, through one orchestratord or three replicas. */
export type PrefixVariant = 'least-loaded' | 'affinity' | 'cache-aware' | 'cache-aware-3r';

/** Tenants of workload 1; each has one long system message that all its requests share. */
export const TENANTS = 8;
/** Words of a tenant's system message: ~2 prompt tokens a word with this tokenizer, so ~2,000 tokens. */
export const PREFIX_WORDS = 1000;
/** A request's own user message: 25–45 words, ~50–100 tokens. */
export const USER_WORDS_MIN = 25;
export const USER_WORDS_MAX = 45;
/** Workload 2: conversations per block, turns each, words of each new user message and of the system prompt. */
export const CONVERSATIONS = 8;
export const CHAT_TURNS = 4;
export const CHAT_WORDS_PER_TURN = 200;
export const CHAT_SYSTEM_WORDS = 100;
/** Workload 2: mean gap between conversation starts, and think time between turns (uniform 0..max). */
export const CHAT_START_GAP_MS = 600;
export const CHAT_THINK_MAX_MS = 1500;

/** Rounds of the engine cache probe, the calibration and the saturation blocks: apart from the measured rounds (0, 1, …). */
export const PROBE_ROUND = 900;
export const CALIBRATION_ROUND = 800;
export const SATURATION_ROUND = 700;

/** Seeds per round and purpose, apart, so that changing one draw leaves the others as they were. */
const SEED = { prefix: 1_000_000, schedule: 2_000_000, tenants: 3_000_000, user: 4_000_000, chat: 5_000_000 } as const;

/**
 * Arrival offsets (ms from the block's start) of a Poisson process of `ratePerS` requests per
 * second: exponential gaps (inverse transform of a uniform draw), the first request at 0.
 */
export function poissonOffsets(rand: () => number, ratePerS: number, n: number): number[] {
  const out: number[] = [];
  let t = 0;
  for (let i = 0; i < n; i++) {
    if (i > 0) t += (-Math.log(1 - rand()) / ratePerS) * 1000;
    out.push(t);
  }
  return out;
}

/** `n` tenants drawn uniformly from `0..tenants-1`. */
export function tenantDraws(rand: () => number, n: number, tenants: number): number[] {
  return Array.from({ length: n }, () => Math.floor(rand() * tenants));
}

/** Workload 1 of one round: the same for every variant (same texts, same arrival times, same tenants). */
export interface TenantRound {
  round: number;
  /** System message per tenant: fresh random words every round, so each block starts cold. */
  systems: string[];
  offsetsMs: number[];
  tenants: number[];
  /** The user message of each request (unique, so only the tenant's system message can be shared). */
  users: string[];
}

export function tenantRound(round: number, ratePerS: number, n: number): TenantRound {
  const systems = Array.from(
    { length: TENANTS },
    (_, t) =>
      `You are the assistant of tenant ${t} (round ${round}). Use only this reference: ${userText(prng(SEED.prefix + round * 100 + t), PREFIX_WORDS)}`,
  );
  const userRand = prng(SEED.user + round);
  const users = Array.from({ length: n }, () =>
    userText(userRand, USER_WORDS_MIN + Math.floor(userRand() * (USER_WORDS_MAX - USER_WORDS_MIN + 1))),
  );
  return {
    round,
    systems,
    offsetsMs: poissonOffsets(prng(SEED.schedule + round), ratePerS, n),
    tenants: tenantDraws(prng(SEED.tenants + round), n, TENANTS),
    users,
  };
}

/** Workload 2 of one round: per conversation a start offset, a system prompt, user messages and think times. */
export interface ChatRound {
  round: number;
  conversations: Array<{ startMs: number; system: string; users: string[]; thinkMs: number[] }>;
}

export function chatRound(round: number): ChatRound {
  const rand = prng(SEED.chat + round);
  const starts = poissonOffsets(rand, 1000 / CHAT_START_GAP_MS, CONVERSATIONS);
  return {
    round,
    conversations: starts.map((startMs, c) => ({
      startMs,
      system: `You are the assistant of conversation ${c} (round ${round}). Background: ${userText(rand, CHAT_SYSTEM_WORDS)}`,
      users: Array.from({ length: CHAT_TURNS }, () => userText(rand, CHAT_WORDS_PER_TURN)),
      thinkMs: Array.from({ length: CHAT_TURNS }, () => rand() * CHAT_THINK_MAX_MS),
    })),
  };
}

/** One request of workload 1 as the client saw it (times in ms from the block's start). */
export interface PrefixRecord {
  variant: PrefixVariant;
  round: number;
  index: number;
  tenant: number;
  correlation_id: string;
  sent_ms: number;
  /** 2xx, a stream that ended with `[DONE]`, a finish reason and usage. */
  ok: boolean;
  error?: string;
  /** Request sent → first content chunk (NaN when it failed). */
  ttft_ms: number;
  end_ms: number;
  prompt_tokens: number;
  cached_tokens: number;
  pool_id?: string;
  /** The placement's reason in orchestratord's `task placed` line (`strategy`, `affinity`, `prefix` …). */
  reason?: string;
  replica?: string;
}

/** One turn of workload 2. */
export interface ChatTurnRecord {
  variant: PrefixVariant;
  round: number;
  conversation: number;
  turn: number;
  correlation_id: string;
  ok: boolean;
  error?: string;
  ttft_ms: number;
  prompt_tokens: number;
  cached_tokens: number;
  completion_tokens: number;
  pool_id?: string;
  reason?: string;
}

/** A request whose prompt was (nearly) all cached, or (nearly) none of it. */
export const HIT_SHARE = 0.8;
export const MISS_SHARE = 0.1;

export interface LoadSummary {
  sent: number;
  completed: number;
  /** completed ÷ sent. */
  successRate: number;
  /** Σ cached_tokens ÷ Σ prompt_tokens over completed requests. */
  cachedShare: number;
  /** Same, leaving out each tenant's first request of a block (always cold: fresh texts per round). */
  cachedShareWarm: number;
  ttft: Summary;
  /** Σ completed ÷ Σ over rounds of (first send → last completion), per second. */
  throughputPerS: number;
  /** Requests per pool. */
  perPool: Record<string, number>;
  /** Mean over (round, tenant) of the distinct pools that served the tenant in the round. */
  poolsPerTenant: number;
  /** TTFT of requests with ≥ HIT_SHARE of their prompt cached, and with < MISS_SHARE. */
  ttftHit: Summary;
  ttftMiss: Summary;
  promptTokens: Summary;
}

export function summarizeLoad(records: readonly PrefixRecord[], variant: PrefixVariant): LoadSummary {
  const mine = records.filter((r) => r.variant === variant);
  const ok = mine.filter((r) => r.ok);
  const share = (rs: readonly PrefixRecord[]): number => {
    let cached = 0;
    let prompt = 0;
    for (const r of rs) {
      cached += r.cached_tokens;
      prompt += r.prompt_tokens;
    }
    return prompt === 0 ? Number.NaN : cached / prompt;
  };
  const seen = new Set<string>();
  const warm = ok.filter((r) => {
    const key = `${r.round}/${r.tenant}`;
    const first = !seen.has(key);
    seen.add(key);
    return !first;
  });
  let completed = 0;
  let spanMs = 0;
  const pools = new Map<string, Set<string>>();
  const perPool: Record<string, number> = {};
  for (const round of new Set(mine.map((r) => r.round))) {
    const inRound = mine.filter((r) => r.round === round);
    const done = inRound.filter((r) => r.ok);
    if (done.length === 0) continue;
    completed += done.length;
    spanMs += Math.max(...done.map((r) => r.end_ms)) - Math.min(...inRound.map((r) => r.sent_ms));
  }
  for (const r of ok) {
    if (r.pool_id === undefined) continue;
    perPool[r.pool_id] = (perPool[r.pool_id] ?? 0) + 1;
    const key = `${r.round}/${r.tenant}`;
    pools.set(key, (pools.get(key) ?? new Set()).add(r.pool_id));
  }
  const spread = [...pools.values()].map((s) => s.size);
  return {
    sent: mine.length,
    completed: ok.length,
    successRate: mine.length === 0 ? Number.NaN : ok.length / mine.length,
    cachedShare: share(ok),
    cachedShareWarm: share(warm),
    ttft: summarize(ok.map((r) => r.ttft_ms)),
    throughputPerS: spanMs === 0 ? Number.NaN : completed / (spanMs / 1000),
    perPool,
    poolsPerTenant: spread.length === 0 ? Number.NaN : spread.reduce((a, b) => a + b, 0) / spread.length,
    ttftHit: summarize(ok.filter((r) => r.cached_tokens >= HIT_SHARE * r.prompt_tokens).map((r) => r.ttft_ms)),
    ttftMiss: summarize(ok.filter((r) => r.cached_tokens < MISS_SHARE * r.prompt_tokens).map((r) => r.ttft_ms)),
    promptTokens: summarize(ok.map((r) => r.prompt_tokens)),
  };
}

/** Requests (same round, same index) that `served` completed and `failed` did not. */
export function failedWhereServed(
  records: readonly PrefixRecord[],
  failed: PrefixVariant,
  served: PrefixVariant,
): number {
  const okOf = new Set(records.filter((r) => r.variant === served && r.ok).map((r) => `${r.round}/${r.index}`));
  return records.filter((r) => r.variant === failed && !r.ok && okOf.has(`${r.round}/${r.index}`)).length;
}

export interface ChatSummary {
  turns: number;
  failed: number;
  /** Σ min(cached, prior) ÷ Σ prior over turns 2+, prior = the previous turn's prompt + answer. */
  priorCachedShare: number;
  /** TTFT of turns 2+. */
  ttft: Summary;
  /** Turns 2+ on the pool of the conversation's previous turn. */
  samePoolShare: number;
}

export function summarizeChats(records: readonly ChatTurnRecord[], variant: PrefixVariant): ChatSummary {
  const mine = records.filter((r) => r.variant === variant);
  const byKey = new Map(mine.map((r) => [`${r.round}/${r.conversation}/${r.turn}`, r]));
  let cached = 0;
  let prior = 0;
  let same = 0;
  let known = 0;
  const ttft: number[] = [];
  for (const r of mine) {
    if (r.turn < 2 || !r.ok) continue;
    const p = byKey.get(`${r.round}/${r.conversation}/${r.turn - 1}`);
    if (p === undefined || !p.ok) continue;
    const before = p.prompt_tokens + p.completion_tokens;
    cached += Math.min(r.cached_tokens, before);
    prior += before;
    ttft.push(r.ttft_ms);
    if (r.pool_id !== undefined && p.pool_id !== undefined) {
      known += 1;
      if (r.pool_id === p.pool_id) same += 1;
    }
  }
  return {
    turns: ttft.length,
    failed: mine.filter((r) => !r.ok).length,
    priorCachedShare: prior === 0 ? Number.NaN : cached / prior,
    ttft: summarize(ttft),
    samePoolShare: known === 0 ? Number.NaN : same / known,
  };
}
