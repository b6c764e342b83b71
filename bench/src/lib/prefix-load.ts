/**
 * The clients of `pnpm bench prefix`: an open loop (requests sent at their Poisson times whatever
 * the answers do), a closed loop (calibration: N clients, each sending its next request when the
 * last one ended), and workload 2's conversations. Every request is one streaming
 * `POST /v1/chat/completions` with usage; a failure is recorded, never thrown.
 */
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Dispatcher } from 'undici';
import { chatTurn, type ChatMessage, type ChatTurn } from './chat.js';
import { MODEL } from './chat-conversation.js';
import { UnexpectedResponseError } from '../errors.js';
import {
  tenantRound,
  CALIBRATION_ROUND,
  HIT_SHARE,
  PROBE_ROUND,
  type ChatRound,
  type ChatTurnRecord,
  type PrefixRecord,
  type PrefixVariant,
  type TenantRound,
} from './prefix-workload.js';

export const MAX_TOKENS = 16;

interface Target {
  url: string;
  token: string;
  agent: Dispatcher;
}

type Outcome = { ok: true; turn: ChatTurn } | { ok: false; error: string; at: number };

/** One request of workload 1, recorded relative to `t0`. */
async function tenantRequest(
  t: Target,
  w: TenantRound,
  variant: PrefixVariant,
  index: number,
  user: string | undefined,
  t0: number,
): Promise<PrefixRecord> {
  const tenant = w.tenants[index] as number;
  const messages: ChatMessage[] = [
    { role: 'system', content: w.systems[tenant] as string },
    { role: 'user', content: w.users[index] as string },
  ];
  const correlationId = randomUUID();
  const sentAt = performance.now();
  const o = await sendWithId(t, messages, user, correlationId);
  const base = { variant, round: w.round, index, tenant, correlation_id: correlationId, sent_ms: sentAt - t0 };
  if (!o.ok)
    return {
      ...base,
      ok: false,
      error: o.error,
      ttft_ms: Number.NaN,
      end_ms: o.at - t0,
      prompt_tokens: 0,
      cached_tokens: 0,
    };
  return {
    ...base,
    ok: true,
    ttft_ms: o.turn.firstTokenAt - o.turn.sentAt,
    end_ms: o.turn.endAt - t0,
    prompt_tokens: o.turn.promptTokens,
    cached_tokens: o.turn.cachedTokens,
  };
}

async function sendWithId(
  t: Target,
  messages: readonly ChatMessage[],
  user: string | undefined,
  correlationId: string,
): Promise<Outcome> {
  try {
    const turn = await chatTurn(
      {
        orchUrl: t.url,
        token: t.token,
        model: MODEL,
        messages,
        maxTokens: MAX_TOKENS,
        seed: Math.floor(Math.random() * 1e9),
        user,
        correlationId,
      },
      t.agent,
    );
    if (turn.finishReason === undefined) return { ok: false, error: 'stream without a finish reason', at: turn.endAt };
    return { ok: true, turn };
  } catch (err) {
    return { ok: false, error: (err as Error).message.slice(0, 300), at: performance.now() };
  }
}

/** `user` of a workload-1 request: the tenant (this round's) with affinity, none otherwise. */
function tenantUser(variant: PrefixVariant, withUser: boolean, w: TenantRound, index: number): string | undefined {
  return withUser ? `prefix-${variant}-r${w.round}-tenant-${w.tenants[index]}` : undefined;
}

/** Workload 1, open loop: request i is sent at `offsetsMs[i]` from the start whatever the earlier ones do. */
export async function openLoop(
  t: Target,
  w: TenantRound,
  variant: PrefixVariant,
  withUser: boolean,
): Promise<PrefixRecord[]> {
  const t0 = performance.now();
  const pending: Array<Promise<PrefixRecord>> = [];
  for (let i = 0; i < w.offsetsMs.length; i++) {
    const wait = t0 + (w.offsetsMs[i] as number) - performance.now();
    if (wait > 0) await sleep(wait);
    pending.push(tenantRequest(t, w, variant, i, tenantUser(variant, withUser, w, i), t0));
  }
  return Promise.all(pending);
}

/**
 * Workload 1, closed loop (calibration, saturation): `clients` clients take the round's requests in order, each
 * sending the next one as soon as its last one ended.
 */
export async function closedLoop(
  t: Target,
  w: TenantRound,
  variant: PrefixVariant,
  clients: number,
  withUser: boolean,
): Promise<PrefixRecord[]> {
  const t0 = performance.now();
  const out: PrefixRecord[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: clients }, async () => {
      while (next < w.tenants.length) {
        const i = next++;
        out.push(await tenantRequest(t, w, variant, i, tenantUser(variant, withUser, w, i), t0));
      }
    }),
  );
  return out.sort((a, b) => a.index - b.index);
}

/**
 * A closed loop after every tenant was sent once (`clients` at a time, not recorded), so that it
 * measures the steady state rather than the round's first visits: `w`'s first `tenants` requests
 * become the warm pass (tenant i for request i), the rest are measured.
 */
export async function warmedClosedLoop(
  t: Target,
  w: TenantRound,
  variant: PrefixVariant,
  clients: number,
  withUser: boolean,
): Promise<PrefixRecord[]> {
  const n = w.systems.length;
  const warm: TenantRound = {
    ...w,
    tenants: w.systems.map((_, i) => i),
    users: w.users.slice(0, n),
    offsetsMs: w.offsetsMs.slice(0, n),
  };
  const measured: TenantRound = {
    ...w,
    tenants: w.tenants.slice(n),
    users: w.users.slice(n),
    offsetsMs: w.offsetsMs.slice(n),
  };
  await closedLoop(t, warm, variant, clients, withUser);
  return closedLoop(t, measured, variant, clients, withUser);
}

/**
 * Workload 2: each conversation starts at its offset; every turn sends the whole history plus a new
 * user message, then the user thinks before the next. `user` = the conversation id with affinity.
 */
export async function chatLoop(
  t: Target,
  w: ChatRound,
  variant: PrefixVariant,
  withUser: boolean,
): Promise<ChatTurnRecord[]> {
  const t0 = performance.now();
  const convs = await Promise.all(
    w.conversations.map(async (c, ci) => {
      const wait = t0 + c.startMs - performance.now();
      if (wait > 0) await sleep(wait);
      const user = withUser ? `prefix-${variant}-r${w.round}-conv-${ci}` : undefined;
      const messages: ChatMessage[] = [{ role: 'system', content: c.system }];
      const records: ChatTurnRecord[] = [];
      for (let turn = 1; turn <= c.users.length; turn++) {
        if (turn > 1) await sleep(c.thinkMs[turn - 1] as number);
        messages.push({ role: 'user', content: c.users[turn - 1] as string });
        const correlationId = randomUUID();
        const o = await sendWithId(t, messages, user, correlationId);
        const base = { variant, round: w.round, conversation: ci, turn, correlation_id: correlationId };
        if (!o.ok) {
          records.push({
            ...base,
            ok: false,
            error: o.error,
            ttft_ms: Number.NaN,
            prompt_tokens: 0,
            cached_tokens: 0,
            completion_tokens: 0,
          });
          break; // the conversation cannot go on without its answer
        }
        messages.push({ role: 'assistant', content: o.turn.text });
        records.push({
          ...base,
          ok: true,
          ttft_ms: o.turn.firstTokenAt - o.turn.sentAt,
          prompt_tokens: o.turn.promptTokens,
          cached_tokens: o.turn.cachedTokens,
          completion_tokens: o.turn.completionTokens,
        });
      }
      return records;
    }),
  );
  return convs.flat();
}

/** One step of the cache probe: `k` distinct long prompts sent, then the first again. */
export interface ProbeStep {
  k: number;
  hit: boolean;
  prompt_tokens: number;
  cached_tokens: number;
  /** TTFT of the revisit, and of the k cold sends before it (an idle engine, nothing else running). */
  ttft_revisit_ms: number;
  ttft_cold_ms: number[];
}

/**
 * How many workload-1 prompts one engine keeps (its slot plus `--cache-ram`): for k = 2, 3, … sends k
 * fresh tenant prompts straight to the engine, then the first one again with a new user message; the
 * revisit is a hit while k prompts fit. Stops at the first miss (the cache drops the oldest first).
 */
export async function cacheProbe(engineUrl: string, agent: Dispatcher, kMax: number): Promise<ProbeStep[]> {
  const t: Target = { url: engineUrl, token: 'unused', agent };
  const steps: ProbeStep[] = [];
  for (let k = 2; k <= kMax; k++) {
    const w = tenantRoundForProbe(k);
    const cold: number[] = [];
    for (let i = 0; i < k; i++) {
      const o = await sendWithId(t, probeMessages(w, i, i), undefined, randomUUID());
      if (!o.ok) throw new UnexpectedResponseError(`cache probe: ${o.error}`);
      cold.push(o.turn.firstTokenAt - o.turn.sentAt);
    }
    const o = await sendWithId(t, probeMessages(w, 0, k), undefined, randomUUID());
    if (!o.ok) throw new UnexpectedResponseError(`cache probe: ${o.error}`);
    const hit = o.turn.cachedTokens >= HIT_SHARE * o.turn.promptTokens;
    steps.push({
      k,
      hit,
      prompt_tokens: o.turn.promptTokens,
      cached_tokens: o.turn.cachedTokens,
      ttft_revisit_ms: o.turn.firstTokenAt - o.turn.sentAt,
      ttft_cold_ms: cold,
    });
    if (!hit) break;
  }
  return steps;
}

/** Fresh tenant texts for probe step k (rounds far from the measured ones). */
function tenantRoundForProbe(k: number): TenantRound {
  return tenantRound(PROBE_ROUND + k, 1, k + 1);
}

function probeMessages(w: TenantRound, tenant: number, userIndex: number): ChatMessage[] {
  return [
    { role: 'system', content: w.systems[tenant] as string },
    { role: 'user', content: w.users[userIndex] as string },
  ];
}

/** `n` short requests at once (unique text, ~60 tokens, no `user`): an engine's first requests are slower than the rest. */
export async function warmUp(t: Target, n: number): Promise<void> {
  const w = tenantRound(CALIBRATION_ROUND + 1, 1, n);
  const outcomes = await Promise.all(
    w.users.map((u) => sendWithId(t, [{ role: 'user', content: u }], undefined, randomUUID())),
  );
  const failed = outcomes.find((o) => !o.ok);
  if (failed !== undefined && !failed.ok) throw new UnexpectedResponseError(`warm-up: ${failed.error}`);
}
