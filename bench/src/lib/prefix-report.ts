/** What `pnpm bench prefix` reports: figures, method and notes from its records. */
import { MODEL } from './chat-conversation.js';
import { HEARTBEAT_MS } from './prefix-fleet.js';
import { MAX_TOKENS, type ProbeStep } from './prefix-load.js';
import {
  failedWhereServed,
  summarizeChats,
  summarizeLoad,
  CHAT_SYSTEM_WORDS,
  CHAT_START_GAP_MS,
  CHAT_THINK_MAX_MS,
  CHAT_TURNS,
  CHAT_WORDS_PER_TURN,
  CONVERSATIONS,
  HIT_SHARE,
  MISS_SHARE,
  PREFIX_WORDS,
  TENANTS,
  USER_WORDS_MAX,
  USER_WORDS_MIN,
  type ChatTurnRecord,
  type LoadSummary,
  type PrefixRecord,
  type PrefixVariant,
} from './prefix-workload.js';
import type { BenchOutcome, Figure } from './result.js';
import { round, rounded, summarize } from './stats.js';

/** CPU the other (idle) fleets used while one variant's block ran. */
export interface IdleCpu {
  variant: PrefixVariant;
  what: string;
  wall_s: number;
  others_cpu_s: number;
}

export interface PrefixRun {
  variants: readonly PrefixVariant[];
  nodes: number;
  cacheRamMiB: number;
  loadFactor: number;
  rounds: number;
  requests: number;
  chatRounds: number;
  capacity: number;
  rate: number;
  calibration: readonly PrefixRecord[];
  /** Closed loop per variant (the calibration's shape), after the other blocks. */
  saturation: readonly PrefixRecord[];
  calibrationClients: number;
  probe: readonly ProbeStep[];
  records: readonly PrefixRecord[];
  turns: readonly ChatTurnRecord[];
  idle: readonly IdleCpu[];
  /** nginx's version when the replicated variant ran. */
  nginx: string | undefined;
  wallS: number;
}

/** Figure keys per variant (`least_loaded`, `affinity`, `cache_aware`, `cache_aware_3r`). */
const key = (v: PrefixVariant): string => v.replace(/-/g, '_');
const pct = (x: number): number => x * 100;

/** Per placement reason (`task placed`): requests, cached share and TTFT p50, to see whether a placement's reason predicted its hit. */
function byReason(
  records: readonly { ok: boolean; reason?: string; cached_tokens: number; prompt_tokens: number; ttft_ms: number }[],
) {
  const out: Record<string, { requests: number; cached_share: number; ttft_p50_ms: number }> = {};
  for (const reason of new Set(records.filter((r) => r.ok).map((r) => r.reason ?? 'unknown'))) {
    const rs = records.filter((r) => r.ok && (r.reason ?? 'unknown') === reason);
    const prompt = rs.reduce((a, r) => a + r.prompt_tokens, 0);
    out[reason] = {
      requests: rs.length,
      cached_share: round(prompt === 0 ? Number.NaN : rs.reduce((a, r) => a + r.cached_tokens, 0) / prompt),
      ttft_p50_ms: round(summarize(rs.map((r) => r.ttft_ms)).p50, 1),
    };
  }
  return out;
}

function loadDetails(s: LoadSummary): Record<string, unknown> {
  return {
    sent: s.sent,
    completed: s.completed,
    success_rate: round(s.successRate),
    cached_share: round(s.cachedShare),
    cached_share_after_first_visit: round(s.cachedShareWarm),
    ttft_ms: rounded(s.ttft, 1),
    ttft_ms_hit: rounded(s.ttftHit, 1),
    ttft_ms_miss: rounded(s.ttftMiss, 1),
    throughput_per_s: round(s.throughputPerS),
    requests_per_pool: s.perPool,
    pools_per_tenant_per_round: round(s.poolsPerTenant, 2),
    prompt_tokens: rounded(s.promptTokens, 0),
  };
}

export function prefixOutcome(run: PrefixRun): BenchOutcome {
  const load = Object.fromEntries(run.variants.map((v) => [v, summarizeLoad(run.records, v)])) as Partial<
    Record<PrefixVariant, LoadSummary>
  >;
  const chats = Object.fromEntries(run.variants.map((v) => [v, summarizeChats(run.turns, v)]));
  const ll = load['least-loaded'] as LoadSummary;
  const ca = load['cache-aware'] as LoadSummary;
  const ca3 = load['cache-aware-3r'];
  const ok = run.records.filter((r) => r.ok);
  const hit = summarize(ok.filter((r) => r.cached_tokens >= HIT_SHARE * r.prompt_tokens).map((r) => r.ttft_ms));
  const miss = summarize(ok.filter((r) => r.cached_tokens < MISS_SHARE * r.prompt_tokens).map((r) => r.ttft_ms));
  const probeFits = run.probe.filter((s) => s.hit).at(-1)?.k ?? 1;
  const probeBeyond = run.probe.some((s) => !s.hit);
  const coldTtft = summarize(run.probe.flatMap((s) => s.ttft_cold_ms));
  const revisitTtft = summarize(run.probe.filter((s) => s.hit).map((s) => s.ttft_revisit_ms));
  const idleShare = run.idle.map((i) => i.others_cpu_s / i.wall_s);

  const figures: Record<string, Figure> = {
    ttft_p50_ratio: {
      label: 'Tenants: TTFT p50, least-loaded ÷ cache-aware',
      value: ll.ttft.p50 / ca.ttft.p50,
      unit: '×',
    },
    throughput_ratio: {
      label: 'Tenants: throughput, cache-aware ÷ least-loaded',
      value: ca.throughputPerS / ll.throughputPerS,
      unit: '×',
    },
    failed_where_least_loaded_served: {
      label: 'Tenants: cache-aware failures on requests least-loaded served',
      value: failedWhereServed(run.records, 'cache-aware', 'least-loaded'),
      unit: 'requests',
    },
    cached_share_replicas_gap: {
      label: 'Tenants: cached share, cache-aware 1 replica vs 3 replicas (|difference|)',
      value: ca3 === undefined ? Number.NaN : Math.abs(pct(ca.cachedShare) - pct(ca3.cachedShare)),
      unit: 'points',
      ...(ca3 === undefined ? { notMeasured: 'the 3-replica variant was not run (--quick or --replicas=0)' } : {}),
    },
    capacity_ratio: {
      label: `Tenants: saturated throughput (closed loop, ${run.calibrationClients} clients), cache-aware ÷ least-loaded`,
      value:
        summarizeLoad(run.saturation, 'cache-aware').throughputPerS /
        summarizeLoad(run.saturation, 'least-loaded').throughputPerS,
      unit: '×',
    },
    capacity_least_loaded: {
      label: `Least-loaded fleet capacity (closed loop, ${run.calibrationClients} clients)`,
      value: run.capacity,
      unit: 'req/s',
    },
    offered_rate: {
      label: `Offered Poisson rate (${pct(run.loadFactor)} % of capacity)`,
      value: run.rate,
      unit: 'req/s',
    },
  };
  for (const v of run.variants) {
    const s = load[v] as LoadSummary;
    const k = key(v);
    figures[`cached_share_${k}`] = { label: `Tenants: cached share, ${v}`, value: pct(s.cachedShare), unit: '%' };
    figures[`ttft_p50_${k}`] = { label: `Tenants: TTFT p50, ${v}`, value: s.ttft.p50, unit: 'ms' };
    figures[`ttft_p99_${k}`] = { label: `Tenants: TTFT p99, ${v}`, value: s.ttft.p99, unit: 'ms' };
    figures[`throughput_${k}`] = { label: `Tenants: throughput, ${v}`, value: s.throughputPerS, unit: 'req/s' };
    figures[`success_${k}`] = { label: `Tenants: success rate, ${v}`, value: pct(s.successRate), unit: '%' };
    figures[`saturated_${k}`] = {
      label: `Tenants: saturated throughput (closed loop), ${v}`,
      value: summarizeLoad(run.saturation, v).throughputPerS,
      unit: 'req/s',
    };
  }
  for (const v of run.variants) {
    const c = chats[v] as ReturnType<typeof summarizeChats>;
    const k = key(v);
    figures[`chat_cached_share_${k}`] = {
      label: `Chats: prior conversation served from cache (turns 2+), ${v}`,
      value: pct(c.priorCachedShare),
      unit: '%',
    };
    figures[`chat_ttft_p50_${k}`] = { label: `Chats: TTFT p50 (turns 2+), ${v}`, value: c.ttft.p50, unit: 'ms' };
  }
  figures.engine_cache_prompts = {
    label: `Tenant prompts one engine keeps (slot + --cache-ram ${run.cacheRamMiB} MiB; probed)`,
    value: probeFits,
    unit: probeBeyond ? 'prompts' : 'prompts or more',
  };
  figures.ttft_hit_p50 = { label: 'Tenants: TTFT p50 of a prefix hit (all variants)', value: hit.p50, unit: 'ms' };
  figures.ttft_miss_p50 = { label: 'Tenants: TTFT p50 of a prefix miss (all variants)', value: miss.p50, unit: 'ms' };

  const promptTokens = summarize(ok.map((r) => r.prompt_tokens));
  return {
    method:
      `${run.variants.length} variants, each with its own orchestratord and its own ${run.nodes} pool-managerd nodes (one pool each: real llama-server, ${MODEL}, ` +
      `1 slot, ctx 4096, threads 1, determinism off (the strict profile bypasses the prompt cache), \`--cache-ram ${run.cacheRamMiB}\`), so one variant's traffic never warms ` +
      "another's caches: least-loaded (ORCHESTRATORD_PLACEMENT_STRATEGY=least-loaded, no `user`); affinity (least-loaded, `user` = the tenant in workload 1, the conversation " +
      'in workload 2: the workaround of today); cache-aware (ORCHESTRATORD_PLACEMENT_STRATEGY=cache-aware, no `user`)' +
      (run.variants.includes('cache-aware-3r')
        ? `; cache-aware-3r (the same through 3 orchestratord replicas on one redis-server behind nginx round-robin, ${run.nginx ?? 'nginx'}; nodes register through the balancer)`
        : '') +
      `. Heartbeats ${HEARTBEAT_MS} ms. The cache size makes an engine keep only a few of the ${TENANTS} tenants' prompts, as in a fleet whose per-engine cache ` +
      `cannot hold every tenant's prefix, while ${TENANTS / run.nodes} per engine (a placement that keeps each tenant on one pool) fit: KV is ~1 KiB per token for this ` +
      `model, so a ~${Math.round(promptTokens.p50)}-token prompt is a ~2.05 MiB cache entry (llama-server's 'making room for prompt cache entry … size' warnings); ` +
      `llama-server saves the slot's prompt (dropping the oldest entries to make room) before it restores a cached one, so ${run.cacheRamMiB} MiB serves ` +
      `floor(${run.cacheRamMiB} ÷ 2.05) distinct prompts back. Probed each run: k fresh tenant prompts sent straight to one idle engine, then the first again; ` +
      `the revisit hit up to k = ${probeFits}${run.probe.some((p) => !p.hit) ? '' : ' (no miss up to the last k probed)'}. ` +
      `Every fleet first answers ${2 * run.nodes} short concurrent requests (warm-up). ` +
      `Workload 1: ${TENANTS} tenants, each a system message of ${PREFIX_WORDS} random words (p50 ${Math.round(promptTokens.p50)} prompt tokens per request with ` +
      `its user message, from usage.prompt_tokens), each request that message plus a unique ${USER_WORDS_MIN}–${USER_WORDS_MAX}-word user message, tenant drawn uniformly, ` +
      `streaming POST /v1/chat/completions with include_usage, max_tokens ${MAX_TOKENS}. Calibration: ${run.calibration.length} such requests in a closed loop of ` +
      `${run.calibrationClients} clients on the least-loaded fleet after each tenant was sent once (not counted; capacity = completed ÷ first send to last completion); then every variant gets the same ` +
      `Poisson arrivals (seeded) at ${pct(run.loadFactor)} % of that capacity, ${run.requests} requests per block, blocks interleaved (${run.variants.join(', ')}; ` +
      `${run.rounds} round(s)), each round with fresh random tenant texts (the same for every variant of the round), so every block starts cold. ` +
      'Cached share = Σ cached_tokens ÷ Σ prompt_tokens (usage.prompt_tokens_details); TTFT = request sent → first content chunk; throughput = completed ÷ ' +
      '(first send → last completion), summed over blocks (below capacity every variant mostly keeps up with the arrivals, so this ratio moves little; ' +
      `the saturated throughput, after the other blocks, is the calibration's closed loop (${run.saturation.filter((r) => r.variant === 'least-loaded').length} requests after a pass over the tenants) on every variant with fresh texts); ` +
      'success = 200 with a stream that ended in [DONE] with a finish reason and usage ÷ sent. ' +
      `Workload 2: ${CONVERSATIONS} conversations × ${CHAT_TURNS} turns per block (a ${CHAT_SYSTEM_WORDS}-word system prompt of its own, each turn the whole history plus ` +
      `a new ${CHAT_WORDS_PER_TURN}-word message), started at Poisson times (mean gap ${CHAT_START_GAP_MS} ms), 0–${CHAT_THINK_MAX_MS} ms think time; cached share ` +
      "= Σ min(cached, prior) ÷ Σ prior over turns 2+ (prior = the previous turn's prompt + answer), TTFT of turns 2+. The pool of each request is the " +
      "`task placed` log line with its correlation id. Before each block the variant's nodes are idle (waitNodeIdle); the other fleets' CPU during each block is measured.",
    samples: {
      rounds: run.rounds,
      requests_per_variant: ll.sent,
      calibration_requests: run.calibration.length,
      saturation_requests_per_variant: run.saturation.filter((r) => r.variant === 'least-loaded').length,
      chat_rounds: run.chatRounds,
      chat_turns_per_variant: run.turns.filter((t) => t.variant === 'least-loaded').length,
    },
    figures,
    details: {
      model: MODEL,
      cache_ram_mib: run.cacheRamMiB,
      capacity_per_s: round(run.capacity),
      rate_per_s: round(run.rate),
      wall_s: round(run.wallS, 1),
      hit_share: HIT_SHARE,
      miss_share: MISS_SHARE,
      ttft_ms_hit: rounded(hit, 1),
      ttft_ms_miss: rounded(miss, 1),
      prompt_tokens: rounded(promptTokens, 0),
      cache_probe: run.probe.map((s) => ({
        ...s,
        ttft_revisit_ms: round(s.ttft_revisit_ms, 1),
        ttft_cold_ms: s.ttft_cold_ms.map((x) => round(x, 1)),
      })),
      probe_ttft_ms_cold: rounded(coldTtft, 1),
      probe_ttft_ms_hit: rounded(revisitTtft, 1),
      tenants: Object.fromEntries(run.variants.map((v) => [v, loadDetails(load[v] as LoadSummary)])),
      placement_reasons: Object.fromEntries(
        run.variants.map((v) => [
          v,
          {
            tenants: byReason(run.records.filter((r) => r.variant === v)),
            chats_turns_2plus: byReason(run.turns.filter((r) => r.variant === v && r.turn >= 2)),
          },
        ]),
      ),
      // The spread between blocks, to judge the ratios by.
      tenants_by_round: Object.fromEntries(
        run.variants.map((v) => [
          v,
          Array.from({ length: run.rounds }, (_, i) => {
            const s = summarizeLoad(
              run.records.filter((r) => r.round === i),
              v,
            );
            return {
              round: i,
              cached_share: round(s.cachedShare),
              ttft_p50_ms: round(s.ttft.p50, 1),
              ttft_p99_ms: round(s.ttft.p99, 1),
              throughput_per_s: round(s.throughputPerS),
              failed: s.sent - s.completed,
            };
          }),
        ]),
      ),
      chats: Object.fromEntries(
        run.variants.map((v) => {
          const c = chats[v] as ReturnType<typeof summarizeChats>;
          return [
            v,
            {
              turns_2plus: c.turns,
              failed: c.failed,
              prior_cached_share: round(c.priorCachedShare),
              ttft_ms: rounded(c.ttft, 1),
              same_pool_share: round(c.samePoolShare),
            },
          ];
        }),
      ),
      calibration: loadDetails(summarizeLoad(run.calibration, 'least-loaded')),
      saturation: Object.fromEntries(run.variants.map((v) => [v, loadDetails(summarizeLoad(run.saturation, v))])),
      idle_fleets_cpu: {
        cores_during_blocks: rounded(summarize(idleShare), 3),
        blocks: run.idle.map((i) => ({ ...i, wall_s: round(i.wall_s, 2), others_cpu_s: round(i.others_cpu_s, 3) })),
      },
      errors: run.records
        .filter((r) => !r.ok)
        .map((r) => ({ variant: r.variant, round: r.round, index: r.index, error: r.error })),
      requests: run.records.map((r) => ({
        ...r,
        sent_ms: round(r.sent_ms, 1),
        ttft_ms: round(r.ttft_ms, 1),
        end_ms: round(r.end_ms, 1),
      })),
    },
    notes: [
      `Least-loaded spreads each tenant over ${round(ll.poolsPerTenant, 2)} pools per round on average (of ${run.nodes}); an engine keeps ${probeFits} tenant prompt(s) ` +
        `(slot + --cache-ram), so the ${TENANTS} tenants cannot all stay warm on every pool. A hit costs ~${Math.round(revisitTtft.p50)} ms TTFT on an idle engine, a miss ` +
        `~${Math.round(coldTtft.p50)} ms (probe); under load, p50 ${Math.round(hit.p50)} vs ${Math.round(miss.p50)} ms.`,
      `The other (idle) fleets used ${round(summarize(idleShare).max, 3)} cores at most while a block ran (mean ${round(summarize(idleShare).mean, 3)}).`,
      `Cache-aware placements by reason (tenants): ${Object.entries(
        byReason(run.records.filter((r) => r.variant === 'cache-aware')),
      )
        .map(([reason, b]) => `${reason} ${b.requests} requests, ${round(pct(b.cached_share), 1)} % cached`)
        .join('; ')}.`,
    ],
  };
}
