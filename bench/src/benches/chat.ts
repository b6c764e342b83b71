import { Agent } from 'undici';
import {
  conversation,
  summary,
  CONVERSATIONS,
  MAX_TOKENS,
  MODEL,
  POOLS,
  THINK_MAX_MS,
  TURNS,
  WORDS_PER_TURN,
  type TurnRecord,
  type Variant,
} from '../lib/chat-conversation.js';
import {
  COLD_START_TIMEOUT_MS,
  newToken,
  startOrchestratord,
  startPoolManagerd,
  waitNodeIdle,
  waitPoolsReady,
} from '../lib/cluster.js';
import { profFlags, type Bench, type BenchContext } from '../lib/context.js';
import type { BenchOutcome } from '../lib/result.js';
import { round, rounded, summarize } from '../lib/stats.js';

export const chatBench: Bench = {
  name: 'chat',
  title: 'Multi-turn chat: prompt cache with and without session affinity (two pools, real llama-server)',
  targets: [
    { figure: 'cached_share_affinity', op: '>=', value: 80, unit: '%' },
    { figure: 'ttft_ratio', op: '>=', value: 2, unit: '×' },
  ],
  async run(ctx: BenchContext): Promise<BenchOutcome> {
    const dir = ctx.dir;
    const token = newToken();
    const heartbeatMs = 1000;
    const orch = await startOrchestratord({
      paths: ctx.paths,
      dir,
      token,
      heartbeatMs,
      // Session affinity against placement that knows nothing of the cache (the default, cache-aware,
      // would find a fresh session's history too: `pnpm bench prefix` measures that).
      env: { ORCHESTRATORD_PLACEMENT_STRATEGY: 'least-loaded' },
      nodeFlags: profFlags(ctx, 'chat-orchestratord'),
    });
    // determinism off: the strict profile bypasses the prompt cache, which is what is measured here
    const pool = (id: string) => ({ id, model: MODEL, ctx: 4096, slots: 1, determinism: false, threads: 1 });
    const nodes = await Promise.all(
      POOLS.map((id, i) =>
        startPoolManagerd({
          paths: ctx.paths,
          dir,
          nodeId: `chat-node-${i + 1}`,
          token,
          orchestratorUrl: orch.url,
          heartbeatMs,
          pools: [pool(id)],
          nodeFlags: profFlags(ctx, `chat-node-${i + 1}`),
        }),
      ),
    );
    const agent = new Agent({ connections: 8, keepAliveTimeout: 30_000 });
    try {
      ctx.log('chat: waiting for both pools (a cold cache builds llama-server and generates the model first)');
      await waitPoolsReady(orch.url, token, [...POOLS], [orch, ...nodes.map((n) => n.daemon)], COLD_START_TIMEOUT_MS);
      const rounds = ctx.quick ? 2 : 24;
      const warmup = ctx.quick ? 0 : 2;
      ctx.log(
        `chat: ${warmup} warm-up + ${rounds} rounds (affinity and fresh sessions alternating), ${CONVERSATIONS} concurrent conversations × ${TURNS} turns each`,
      );
      const records: TurnRecord[] = [];
      for (let i = 0; i < warmup + rounds; i++) {
        const variant: Variant = i % 2 === 0 ? 'affinity' : 'fresh';
        for (const n of nodes) await waitNodeIdle(orch.url, token, n.nodeId, 20_000);
        const convs = await Promise.all(
          Array.from({ length: CONVERSATIONS }, (_, c) =>
            conversation({ orchUrl: orch.url, token, variant, round: i, conversation: c, agent }),
          ),
        );
        if (i >= warmup) records.push(...convs.flat());
      }
      // Which pool served each turn: orchestratord's `task placed` line carries the turn's correlation id.
      const placedOn = new Map<string, string>();
      for (const l of orch.logs()) {
        if (l.msg === 'task placed' && typeof l.correlation_id === 'string' && typeof l.pool_id === 'string')
          placedOn.set(l.correlation_id, l.pool_id);
      }
      for (const r of records) {
        const p = placedOn.get(r.correlation_id);
        if (p !== undefined) r.pool_id = p;
      }
      const withAff = summary(records, 'affinity');
      const fresh = summary(records, 'fresh');
      const pct = (x: number): number => x * 100;
      const hit = summarize([...withAff.hits, ...fresh.hits]);
      const miss = summarize([...withAff.misses, ...fresh.misses]);
      const missShareFresh = fresh.turns === 0 ? Number.NaN : fresh.misses.length / fresh.turns;
      return {
        method:
          `Two pool-managerd nodes, one pool each (real llama-server, ${MODEL}, 1 slot, ctx 4096, prompt cache on: not the ` +
          `determinism profile). Each round runs ${CONVERSATIONS} conversations at once (as many as there are slots) of ${TURNS} ` +
          `turns through POST /v1/chat/completions (streaming, include_usage); every turn sends the whole conversation so ` +
          `far plus a new ~${WORDS_PER_TURN}-word user message (unique text per conversation, so only a conversation's own ` +
          `history can be cached) and waits for its ${MAX_TOKENS}-token answer, then a random think time of 0–${THINK_MAX_MS} ms. ` +
          "Rounds alternate (A B A B …) between affinity (the conversation's `user` on every turn) and fresh sessions (a new " +
          '`user` per turn, so placement alone decides: least-loaded, set explicitly, as cache-aware would follow the history), after warm-up rounds. Cached share = Σ cached_tokens ÷ Σ (previous ' +
          "turn's prompt + answer tokens) over turns 2+ (usage.prompt_tokens_details.cached_tokens; the cache can also hold " +
          'an earlier prefix of a conversation, so each turn counts at most its prior conversation). TTFT = request sent → ' +
          'first chunk with content, turns 2+; the ratio is fresh p50 ÷ affinity p50. The pool of each turn comes from ' +
          "orchestratord's `task placed` log line with the turn's correlation id.",
        samples: {
          rounds,
          conversations: rounds * CONVERSATIONS,
          turns_2plus_affinity: withAff.turns,
          turns_2plus_fresh: fresh.turns,
        },
        figures: {
          cached_share_affinity: {
            label: 'Prior conversation served from cache, affinity (turns 2+)',
            value: pct(withAff.priorCachedShare),
            unit: '%',
          },
          cached_share_fresh: {
            label: 'Prior conversation served from cache, fresh session per turn',
            value: pct(fresh.priorCachedShare),
            unit: '%',
          },
          ttft_affinity_p50: { label: 'TTFT turns 2+, affinity, p50', value: withAff.ttft.p50, unit: 'ms' },
          ttft_fresh_p50: { label: 'TTFT turns 2+, fresh sessions, p50', value: fresh.ttft.p50, unit: 'ms' },
          ttft_ratio: {
            label: 'TTFT turns 2+: fresh ÷ affinity (p50)',
            value: fresh.ttft.p50 / withAff.ttft.p50,
            unit: '×',
          },
          ttft_ratio_mean: {
            label: 'TTFT turns 2+: fresh ÷ affinity (mean)',
            value: fresh.ttft.mean / withAff.ttft.mean,
            unit: '×',
          },
          ttft_miss_over_hit: {
            label: 'TTFT of a turn with its history uncached ÷ cached (p50, both variants)',
            value: miss.p50 / hit.p50,
            unit: '×',
          },
          uncached_turns_fresh: {
            label: 'Turns 2+ with < 10 % of their history cached, fresh sessions',
            value: pct(missShareFresh),
            unit: '%',
          },
          same_pool_affinity: {
            label: "Turns 2+ on the previous turn's pool, affinity",
            value: pct(withAff.samePoolShare),
            unit: '%',
          },
          same_pool_fresh: {
            label: "Turns 2+ on the previous turn's pool, fresh sessions",
            value: pct(fresh.samePoolShare),
            unit: '%',
          },
          prompt_tokens_turn3_p50: {
            label: 'Prompt tokens at turn 3, p50',
            value: withAff.turn3Prompt.p50,
            unit: 'tokens',
          },
        },
        details: {
          model: MODEL,
          ttft_ms_history_cached: rounded(hit, 1),
          ttft_ms_history_uncached: rounded(miss, 1),
          affinity: {
            ttft_ms: rounded(withAff.ttft, 1),
            ttft_ms_by_turn: withAff.ttftByTurn,
            cached_of_prompt: round(withAff.cachedOfPrompt),
            prior_cached_share: round(withAff.priorCachedShare),
            same_pool_share: round(withAff.samePoolShare),
          },
          fresh: {
            ttft_ms: rounded(fresh.ttft, 1),
            ttft_ms_by_turn: fresh.ttftByTurn,
            cached_of_prompt: round(fresh.cachedOfPrompt),
            prior_cached_share: round(fresh.priorCachedShare),
            same_pool_share: round(fresh.samePoolShare),
          },
          turns: records.map((r) => ({
            ...r,
            ttft_ms: round(r.ttft_ms, 2),
            prior_cached_share: r.prior_cached_share === undefined ? undefined : round(r.prior_cached_share),
          })),
        },
        notes: [
          "llama-server keeps a host-RAM prompt cache (`--cache-ram`, 8 GiB by default) besides the slot's KV cache: a turn placed on a pool " +
            "that served an earlier turn of the same conversation gets that turn's prefix back from RAM. With two pools, a conversation without " +
            'affinity therefore misses its cache only on its first visit to the other pool; ttft_miss_over_hit is what each such miss costs, and ' +
            'uncached_turns_fresh how often it happened. With more pools the share of such first visits, and so the gap, grows.',
        ],
      };
    } finally {
      await agent.close();
      await Promise.all(nodes.map((n) => n.daemon.stop()));
      await orch.stop();
    }
  },
};
