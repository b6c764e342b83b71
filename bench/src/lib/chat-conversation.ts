/** The chat benchmarks' conversations and their summary (`chat`: affinity vs fresh sessions; `chat-replicas`: through 3 replicas vs one process). */
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { Agent } from 'undici';
import { chatTurn, priorCachedShare, prng, userText, type ChatMessage } from './chat.js';
import { rounded, summarize } from './stats.js';

/**
 * A synthetic model whose prompt processing scales with the tokens evaluated, as a real model's
 * does (a wide feed-forward dominates; with a wide embedding instead, attention over the cached
 * history makes new tokens cost more the longer the conversation, which real GPU serving does not
 * show), and costs well above a turn's fixed overhead (~0.3 ms per prompt token here). Trained
 * context 4096: llama-server caps a slot at the model's context, and four turns need ~1,700.
 */
export const MODEL = 'synthetic:llama?layers=2&embd=128&heads=4&ff=8192&ctx=4096';
export const POOLS = ['ca', 'cb'] as const;
export const TURNS = 4;
/** ~200 words ≈ 400 prompt tokens per user message: turn 3 carries 1,200+ prompt tokens. */
export const WORDS_PER_TURN = 200;
export const MAX_TOKENS = 16;
/** Concurrent conversations per round: as many as there are slots, so no turn queues behind another. */
export const CONVERSATIONS = 2;
/**
 * A user reads and types between turns (random 0..THINK_MAX_MS, about two turns' time), so the two
 * conversations' turns sometimes overlap and sometimes find both pools free: placement without
 * affinity then sends a turn to either pool, as it would in a busier fleet.
 */
export const THINK_MAX_MS = 1000;
export const SYSTEM = 'You are a concise assistant. Answer in one short paragraph.';

/** `affinity`: the conversation's `user` on every turn; `fresh`: a new `user` per turn; `replicas`/`single`: affinity through 3 replicas or one orchestratord (chat-replicas). */
export type Variant = 'affinity' | 'fresh' | 'replicas' | 'single';

export interface TurnRecord {
  variant: Variant;
  round: number;
  conversation: number;
  turn: number;
  correlation_id: string;
  ttft_ms: number;
  prompt_tokens: number;
  cached_tokens: number;
  completion_tokens: number;
  /** Turns 2+: cached ÷ (previous turn's prompt + answer). */
  prior_cached_share?: number;
  pool_id?: string;
  /** The replica that placed the turn (chat-replicas). */
  replica?: string;
}

export interface ConversationArgs {
  orchUrl: string;
  token: string;
  variant: Variant;
  round: number;
  conversation: number;
  agent: Agent;
}

/**
 * One conversation: each turn sends the whole history plus a new user message. With affinity the
 * conversation's `user` is the same on every turn; without, every turn has a fresh `user` (a new
 * session: placement alone decides).
 */
export async function conversation(a: ConversationArgs): Promise<TurnRecord[]> {
  const seed = a.round * 100 + a.conversation;
  const rand = prng(seed);
  const user = `chat-bench-${randomUUID()}`;
  const messages: ChatMessage[] = [{ role: 'system', content: SYSTEM }];
  const records: TurnRecord[] = [];
  for (let turn = 1; turn <= TURNS; turn++) {
    if (turn > 1) await sleep(rand() * THINK_MAX_MS);
    messages.push({ role: 'user', content: userText(rand, WORDS_PER_TURN) });
    const correlationId = randomUUID();
    const t = await chatTurn(
      {
        orchUrl: a.orchUrl,
        token: a.token,
        model: MODEL,
        messages,
        maxTokens: MAX_TOKENS,
        seed: seed * 10 + turn,
        user: a.variant === 'fresh' ? `chat-bench-${randomUUID()}` : user,
        correlationId,
      },
      a.agent,
    );
    messages.push({ role: 'assistant', content: t.text });
    const previous = records.at(-1);
    records.push({
      variant: a.variant,
      round: a.round,
      conversation: a.conversation,
      turn,
      correlation_id: correlationId,
      ttft_ms: t.firstTokenAt - t.sentAt,
      prompt_tokens: t.promptTokens,
      cached_tokens: t.cachedTokens,
      completion_tokens: t.completionTokens,
      ...(previous === undefined
        ? {}
        : {
            prior_cached_share: priorCachedShare(t.cachedTokens, {
              promptTokens: previous.prompt_tokens,
              completionTokens: previous.completion_tokens,
            }),
          }),
    });
  }
  return records;
}

/** The variant's figures over turns 2+ (each turn compared with its own conversation's previous turn). */
export type ChatSummary = ReturnType<typeof summary>;

export function summary(records: readonly TurnRecord[], variant: Variant) {
  const all = records.filter((r) => r.variant === variant);
  const later = all.filter((r) => r.turn >= 2);
  const previousOf = (r: TurnRecord): TurnRecord | undefined =>
    all.find((p) => p.round === r.round && p.conversation === r.conversation && p.turn === r.turn - 1);
  let cached = 0;
  let prior = 0;
  let prompt = 0;
  let samePool = 0;
  let poolKnown = 0;
  for (const r of later) {
    const p = previousOf(r);
    if (p === undefined) continue;
    cached += Math.min(r.cached_tokens, p.prompt_tokens + p.completion_tokens);
    prior += p.prompt_tokens + p.completion_tokens;
    prompt += r.prompt_tokens;
    if (r.pool_id !== undefined && p.pool_id !== undefined) {
      poolKnown += 1;
      if (r.pool_id === p.pool_id) samePool += 1;
    }
  }
  const ttftByTurn: Record<string, ReturnType<typeof rounded>> = {};
  // A turn whose prior conversation was (nearly) all cached vs one that found (nearly) none of it:
  // the gain per turn that affinity can give, whatever the variant.
  const hits = later.filter((r) => (r.prior_cached_share ?? 0) >= 0.9).map((r) => r.ttft_ms);
  const misses = later.filter((r) => (r.prior_cached_share ?? 1) < 0.1).map((r) => r.ttft_ms);
  for (let t = 1; t <= TURNS; t++)
    ttftByTurn[`turn_${t}`] = rounded(summarize(all.filter((r) => r.turn === t).map((r) => r.ttft_ms)), 1);
  return {
    turns: later.length,
    priorCachedShare: prior === 0 ? Number.NaN : cached / prior,
    cachedOfPrompt: prompt === 0 ? Number.NaN : cached / prompt,
    samePoolShare: poolKnown === 0 ? Number.NaN : samePool / poolKnown,
    ttft: summarize(later.map((r) => r.ttft_ms)),
    ttftByTurn,
    turn3Prompt: summarize(all.filter((r) => r.turn === 3).map((r) => r.prompt_tokens)),
    hits,
    misses,
  };
}
