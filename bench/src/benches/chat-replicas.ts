import { freeLoopbackPort } from '@llama-orch/daemon-support';
import { startRedisServer } from '@llama-orch/daemon-support/redis-server';
import type { FileLoggedDaemon } from '@llama-orch/daemon-support/daemon-launcher';
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
  type PoolManagerdHandle,
} from '../lib/cluster.js';
import { profFlags, type Bench, type BenchContext } from '../lib/context.js';
import { ensureNginx, nginxVersion, startNginxHop, type NginxHop } from '../lib/nginx.js';
import type { BenchOutcome } from '../lib/result.js';
import { round, rounded } from '../lib/stats.js';

/**
 * `pnpm bench chat-replicas`: the chat benchmark's conversations (session affinity on every turn)
 * through 3 orchestratord replicas on one redis-server behind nginx round-robin, so consecutive
 * turns of a conversation land on different replicas, against the same conversations through one
 * orchestratord (in-process store), rounds interleaved. Each side has its own two pool-managerd
 * nodes (one pool each, real llama-server).
 */

const REPLICAS = ['r1', 'r2', 'r3'] as const;
const HEARTBEAT_MS = 1000;

interface Side {
  url: string;
  orchestrators: FileLoggedDaemon[];
  nodes: PoolManagerdHandle[];
}

async function startNodes(
  ctx: BenchContext,
  token: string,
  url: string,
  prefix: string,
): Promise<PoolManagerdHandle[]> {
  // determinism off: the strict profile bypasses the prompt cache, which is what is measured here
  return Promise.all(
    POOLS.map((id, i) =>
      startPoolManagerd({
        paths: ctx.paths,
        dir: ctx.dir,
        nodeId: `${prefix}-node-${i + 1}`,
        token,
        orchestratorUrl: url,
        heartbeatMs: HEARTBEAT_MS,
        pools: [{ id, model: MODEL, ctx: 4096, slots: 1, determinism: false, threads: 1 }],
        nodeFlags: profFlags(ctx, `${prefix}-node-${i + 1}`),
      }),
    ),
  );
}

interface Placement {
  pool: string;
  replica: string;
  /** The placement's reason (`affinity`: the session's pool; `strategy`: no usable session pool). */
  reason: string;
}

/** Which pool, which replica and why, for each turn: the `task placed` line with the turn's correlation id. */
function placements(orchestrators: readonly FileLoggedDaemon[], names: readonly string[]): Map<string, Placement> {
  const out = new Map<string, Placement>();
  orchestrators.forEach((d, i) => {
    for (const l of d.logs()) {
      if (l.msg === 'task placed' && typeof l.correlation_id === 'string' && typeof l.pool_id === 'string') {
        out.set(l.correlation_id, {
          pool: l.pool_id,
          replica: names[i] as string,
          reason: typeof l.reason === 'string' ? l.reason : 'unknown',
        });
      }
    }
  });
  return out;
}

/** Turns 2+ of a side placed other than by affinity (the session's pool was not found or not usable). */
function withoutAffinity(
  records: readonly TurnRecord[],
  variant: Variant,
  placed: ReadonlyMap<string, Placement>,
): number {
  return records.filter(
    (r) => r.variant === variant && r.turn >= 2 && placed.get(r.correlation_id)?.reason !== 'affinity',
  ).length;
}

/** Turns 2+ whose replica differs from their conversation's previous turn, and turns per replica. */
function replicaSpread(records: readonly TurnRecord[]): {
  otherReplicaShare: number;
  perReplica: Record<string, number>;
} {
  const mine = records.filter((r) => r.variant === 'replicas');
  const perReplica: Record<string, number> = {};
  for (const r of mine) perReplica[r.replica ?? 'unknown'] = (perReplica[r.replica ?? 'unknown'] ?? 0) + 1;
  let known = 0;
  let other = 0;
  for (const r of mine.filter((x) => x.turn >= 2)) {
    const p = mine.find((x) => x.round === r.round && x.conversation === r.conversation && x.turn === r.turn - 1);
    if (p?.replica === undefined || r.replica === undefined) continue;
    known += 1;
    if (p.replica !== r.replica) other += 1;
  }
  return { otherReplicaShare: known === 0 ? Number.NaN : other / known, perReplica };
}

export const chatReplicasBench: Bench = {
  name: 'chat-replicas',
  title:
    'Multi-turn chat through 3 replicas (one Redis, nginx round-robin) vs one process: prompt cache kept (two pools, real llama-server)',
  targets: [{ figure: 'cached_share_replicas', op: '>=', value: 80, unit: '%' }],
  async run(ctx: BenchContext): Promise<BenchOutcome> {
    const token = newToken();
    const redis = await startRedisServer();
    const replicas: FileLoggedDaemon[] = [];
    let lb: NginxHop | undefined;
    const stops: Array<() => Promise<unknown>> = [];
    const agent = new Agent({ connections: 8, keepAliveTimeout: 30_000 });
    try {
      for (const id of REPLICAS) {
        const port = await freeLoopbackPort();
        replicas.push(
          await startOrchestratord({
            paths: ctx.paths,
            dir: ctx.dir,
            token,
            heartbeatMs: HEARTBEAT_MS,
            name: `chat-replica-${id}`,
            env: {
              ORCHD_ADDR: `127.0.0.1:${port}`,
              ORCHD_ADVERTISE_URL: `http://127.0.0.1:${port}`,
              ORCHD_REDIS_URL: redis.url,
              ORCHD_REDIS_PREFIX: 'chat:',
              ORCHD_REPLICA_ID: id,
            },
            nodeFlags: profFlags(ctx, `chat-replica-${id}`),
          }),
        );
      }
      for (const r of replicas) stops.push(() => r.stop());
      const nginxBin = ensureNginx(ctx.log);
      lb = await startNginxHop(
        nginxBin,
        ctx.dir,
        'chat-lb',
        replicas.map((r) => r.url),
        'keepalive',
      );
      const single = await startOrchestratord({
        paths: ctx.paths,
        dir: ctx.dir,
        token,
        heartbeatMs: HEARTBEAT_MS,
        name: 'chat-single',
        nodeFlags: profFlags(ctx, 'chat-single'),
      });
      stops.push(() => single.stop());
      // nodes register and heartbeat through the balancer, like the clients
      const clusterNodes = await startNodes(ctx, token, lb.url, 'chat-cluster');
      const singleNodes = await startNodes(ctx, token, single.url, 'chat-single');
      for (const n of [...clusterNodes, ...singleNodes]) stops.unshift(() => n.daemon.stop());
      const sides: Record<'replicas' | 'single', Side> = {
        replicas: { url: lb.url, orchestrators: replicas, nodes: clusterNodes },
        single: { url: single.url, orchestrators: [single], nodes: singleNodes },
      };
      ctx.log(
        'chat-replicas: waiting for the pools of both sides (a cold cache builds llama-server and generates the model first)',
      );
      for (const s of Object.values(sides))
        await waitPoolsReady(
          s.url,
          token,
          [...POOLS],
          [...s.orchestrators, ...s.nodes.map((n) => n.daemon)],
          COLD_START_TIMEOUT_MS,
        );
      const rounds = ctx.quick ? 2 : 24;
      const warmup = ctx.quick ? 0 : 2;
      ctx.log(
        `chat-replicas: ${warmup} warm-up + ${rounds} rounds (3 replicas and one process alternating), ${CONVERSATIONS} concurrent conversations × ${TURNS} turns each`,
      );
      const records: TurnRecord[] = [];
      for (let i = 0; i < warmup + rounds; i++) {
        const variant: Variant = i % 2 === 0 ? 'replicas' : 'single';
        const side = sides[variant];
        for (const n of side.nodes) await waitNodeIdle(side.url, token, n.nodeId, 20_000);
        const convs = await Promise.all(
          Array.from({ length: CONVERSATIONS }, (_, c) =>
            conversation({ orchUrl: side.url, token, variant, round: i, conversation: c, agent }),
          ),
        );
        if (i >= warmup) records.push(...convs.flat());
      }
      const placed = new Map([...placements(replicas, REPLICAS), ...placements([single], ['single'])]);
      for (const r of records) {
        const p = placed.get(r.correlation_id);
        if (p !== undefined) {
          r.pool_id = p.pool;
          r.replica = p.replica;
        }
      }
      const rep = summary(records, 'replicas');
      const one = summary(records, 'single');
      const spread = replicaSpread(records);
      const pct = (x: number): number => x * 100;
      return {
        method:
          `The chat benchmark's conversations with session affinity (the conversation's \`user\` on every turn): ${CONVERSATIONS} at once per round, ${TURNS} turns of POST /v1/chat/completions ` +
          `(streaming, include_usage), each the whole conversation so far plus a new ~${WORDS_PER_TURN}-word user message, ${MAX_TOKENS}-token answers, 0–${THINK_MAX_MS} ms think time. ` +
          `Two sides, rounds alternating after warm-up: (a) 3 orchestratord replicas (ORCHD_REDIS_URL, one prefix) on one redis-server (Debian's, no persistence) behind nginx (${nginxVersion(nginxBin)}, ` +
          'round-robin, keepalive upstreams): every request of a conversation may land on any replica; (b) one orchestratord on the in-process store. Each side has its own 2 pool-managerd nodes ' +
          `(one pool each: real llama-server, ${MODEL}, 1 slot, ctx 4096, prompt cache on), registered and heartbeating (${HEARTBEAT_MS} ms) through the balancer on side (a). ` +
          "Cached share = Σ cached_tokens ÷ Σ (previous turn's prompt + answer tokens) over turns 2+. The pool and the replica of each turn come from the `task placed` log line " +
          "(with the turn's correlation id) of the replica that placed it, with its reason (`affinity` or not).",
        samples: {
          rounds,
          conversations: rounds * CONVERSATIONS,
          turns_2plus_replicas: rep.turns,
          turns_2plus_single: one.turns,
        },
        figures: {
          cached_share_replicas: {
            label: 'Prior conversation served from cache, through 3 replicas (turns 2+)',
            value: pct(rep.priorCachedShare),
            unit: '%',
          },
          cached_share_single: {
            label: 'Prior conversation served from cache, one process (same run)',
            value: pct(one.priorCachedShare),
            unit: '%',
          },
          other_replica: {
            label: 'Turns 2+ placed by another replica than the previous turn',
            value: pct(spread.otherReplicaShare),
            unit: '%',
          },
          same_pool_replicas: {
            label: "Turns 2+ on the previous turn's pool, 3 replicas",
            value: pct(rep.samePoolShare),
            unit: '%',
          },
          same_pool_single: {
            label: "Turns 2+ on the previous turn's pool, one process",
            value: pct(one.samePoolShare),
            unit: '%',
          },
          no_affinity_replicas: {
            label: 'Turns 2+ not placed by affinity, 3 replicas',
            value: withoutAffinity(records, 'replicas', placed),
            unit: 'turns',
          },
          no_affinity_single: {
            label: 'Turns 2+ not placed by affinity, one process',
            value: withoutAffinity(records, 'single', placed),
            unit: 'turns',
          },
          ttft_replicas_p50: { label: 'TTFT turns 2+, 3 replicas, p50', value: rep.ttft.p50, unit: 'ms' },
          ttft_single_p50: { label: 'TTFT turns 2+, one process, p50', value: one.ttft.p50, unit: 'ms' },
        },
        details: {
          model: MODEL,
          heartbeat_ms: HEARTBEAT_MS,
          turns_per_replica: spread.perReplica,
          replicas: {
            ttft_ms: rounded(rep.ttft, 1),
            ttft_ms_by_turn: rep.ttftByTurn,
            cached_of_prompt: round(rep.cachedOfPrompt),
            prior_cached_share: round(rep.priorCachedShare),
          },
          single: {
            ttft_ms: rounded(one.ttft, 1),
            ttft_ms_by_turn: one.ttftByTurn,
            cached_of_prompt: round(one.cachedOfPrompt),
            prior_cached_share: round(one.priorCachedShare),
          },
          turns: records.map((r) => ({
            ...r,
            ttft_ms: round(r.ttft_ms, 2),
            prior_cached_share: r.prior_cached_share === undefined ? undefined : round(r.prior_cached_share),
          })),
        },
        notes: [
          `Turns placed per replica: ${Object.entries(spread.perReplica)
            .map(([r, n]) => `${r} ${n}`)
            .join(
              ', ',
            )} (pool-managerd heartbeats and the other conversation's requests also go round the balancer, so a conversation does not simply alternate).`,
        ],
      };
    } finally {
      await agent.close();
      for (const s of stops) await s();
      await lb?.stop();
      await redis.stop();
    }
  },
};
