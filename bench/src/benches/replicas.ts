import { loadavg } from 'node:os';
import { startRedisServer } from '@llama-orch/daemon-support/redis-server';
import { newToken } from '../lib/cluster.js';
import type { Bench, BenchContext } from '../lib/context.js';
import type { BenchOutcome, Figure } from '../lib/result.js';
import { scaleCurve, SCALE_MODEL, type ScaleSample, type ScaleSizes } from '../lib/scale-curve.js';
import { median, round, rounded, summarize } from '../lib/stats.js';
import {
  startStoreConfig,
  stopStoreConfig,
  storeRound,
  STREAM_MODEL,
  STREAM_TOKEN_INTERVAL_MS,
  type StoreConfig,
  type StoreKind,
  type StoreRound,
  type StoreRoundSizes,
} from '../lib/store-compare.js';

/** The store comparison's sizes: full run and `--quick` (a smoke run of the harness). */
function storeSizes(quick: boolean): StoreRoundSizes & { rounds: number } {
  return {
    rounds: quick ? 1 : 4,
    admissionS: quick ? 2 : 5,
    relayLoad: { clients: 2, streamsPerClient: 8, model: STREAM_MODEL, maxTokens: 100, inline: false },
    relaySettleS: 1,
    relayWindowS: quick ? 2 : 8,
    ttftPairs: quick ? 10 : 50,
  };
}

/**
 * Each replica's cap: 0.1 core, so that 2 saturated replicas leave most of this 2-core shared
 * machine to the FIXTURE nodes, nginx and the clients (at 0.15 they did not: see the notes).
 * `BENCH_REPLICA_CPU` (cores), `BENCH_REPLICA_STREAMS` (per client, 2 clients a replica) and
 * `BENCH_REPLICA_TOKEN_MS` override, e.g. on a machine with more cores.
 */
function scaleSizes(quick: boolean): ScaleSizes {
  return {
    capCores: Number(process.env.BENCH_REPLICA_CPU ?? 0.1),
    tokenIntervalMs: Number(process.env.BENCH_REPLICA_TOKEN_MS ?? 4),
    loadPerReplica: {
      clients: 2,
      streamsPerClient: Number(process.env.BENCH_REPLICA_STREAMS ?? 10),
      model: SCALE_MODEL,
      maxTokens: 200,
      inline: true,
    },
    settleS: quick ? 1 : 2,
    windowS: quick ? 2 : 10,
    rounds: quick ? 1 : 4,
    warmupS: quick ? 0 : 5,
    twin: !quick,
  };
}

interface StoreSummary {
  tasksPerS: number;
  admission: ReturnType<typeof summarize>;
  cpuUsPerToken: number;
  cpuUsPerTokenRounds: number[];
  tokensPerS: number;
  ttftDirect: number;
  ttftRelayed: number;
  ttftAdded: number;
  errored: number;
}

function summarizeStore(rounds: readonly StoreRound[]): StoreSummary {
  const tokens = rounds.reduce((a, r) => a + r.relay.tokens, 0);
  const cpu = rounds.reduce((a, r) => a + (r.relay.cpuS[0] as number), 0);
  const direct = median(rounds.flatMap((r) => r.ttft.direct));
  const relayed = median(rounds.flatMap((r) => r.ttft.relayed));
  return {
    tasksPerS: median(rounds.map((r) => r.admission.tasksPerS)),
    admission: summarize(rounds.flatMap((r) => r.admission.latenciesMs)),
    cpuUsPerToken: (cpu * 1e6) / tokens,
    cpuUsPerTokenRounds: rounds.map((r) => Math.round(r.relay.cpuUsPerToken * 100) / 100),
    tokensPerS: median(rounds.map((r) => r.relay.tokens / r.relay.seconds)),
    ttftDirect: direct,
    ttftRelayed: relayed,
    ttftAdded: relayed - direct,
    errored: rounds.reduce((a, r) => a + r.relay.errored, 0),
  };
}

async function compareStores(
  ctx: BenchContext,
  token: string,
  redisUrl: string,
): Promise<Record<StoreKind, StoreRound[]>> {
  const sizes = storeSizes(ctx.quick);
  const configs: StoreConfig[] = [];
  try {
    const started = await Promise.allSettled(
      (['memory', 'redis'] as const).map((kind) => startStoreConfig(ctx, kind, token, redisUrl)),
    );
    for (const s of started) if (s.status === 'fulfilled') configs.push(s.value);
    for (const s of started) if (s.status === 'rejected') throw s.reason;
    // Warm-up round on each, not kept: admission costs 4× more CPU per task in its first seconds
    // (JIT) than after ~8 s of load. A quick run skips it (it checks the harness only).
    if (!ctx.quick) {
      ctx.log('replicas: warm-up round on both stores');
      for (const c of configs)
        await storeRound(ctx, c, token, { ...sizes, admissionS: 8, relayWindowS: 4, ttftPairs: 10 });
    }
    const out: Record<StoreKind, StoreRound[]> = { memory: [], redis: [] };
    for (let round = 0; round < sizes.rounds; round++) {
      const order = round % 2 === 0 ? configs : [...configs].reverse();
      for (const c of order) {
        const r = await storeRound(ctx, c, token, sizes);
        out[c.kind].push(r);
        ctx.log(
          `replicas: round ${round} ${c.kind}: ${Math.round(r.admission.tasksPerS)} tasks/s, ${r.relay.cpuUsPerToken.toFixed(1)} µs CPU/token at ${Math.round(r.relay.tokens / r.relay.seconds)} tokens/s`,
        );
      }
    }
    return out;
  } finally {
    for (const c of configs) await stopStoreConfig(c);
  }
}

function scaleSummary(
  samples: readonly ScaleSample[],
  n: 1 | 2,
  twin = false,
): { tokensPerS: number; capUse: number; cpuUsPerToken: number; lbCores: number; idlePeerMsPerS?: number } {
  const mine = samples.filter((s) => s.replicas === n && s.twin === twin);
  const idlePeer = mine.flatMap((s) => (s.idlePeerCores !== undefined ? [s.idlePeerCores * 1000] : []));
  return {
    tokensPerS: median(mine.map((s) => s.tokensPerS)),
    capUse: median(mine.flatMap((s) => s.capUse)),
    cpuUsPerToken: median(mine.map((s) => s.cpuUsPerToken)),
    lbCores: median(mine.map((s) => s.lbCores)),
    ...(idlePeer.length > 0 ? { idlePeerMsPerS: median(idlePeer) } : {}),
  };
}

export const replicasBench: Bench = {
  name: 'replicas',
  title: 'Replicas: in-process vs Redis store, and the scale curve (FIXTURE nodes)',
  targets: [
    { figure: 'cpu_per_token_ratio', op: '<=', value: 1.15, unit: '×' },
    { figure: 'redis_admission_p99', op: '<=', value: 10, unit: 'ms' },
    { figure: 'scale_ratio', op: '>=', value: 1.8, unit: '×' },
  ],
  async run(ctx: BenchContext): Promise<BenchOutcome> {
    const token = newToken();
    const redis = await startRedisServer();
    let stores: Record<StoreKind, StoreRound[]>;
    let scale: Awaited<ReturnType<typeof scaleCurve>>;
    const ssz = storeSizes(ctx.quick);
    const csz = scaleSizes(ctx.quick);
    try {
      ctx.log(`replicas: part 1, in-process vs Redis (${ssz.rounds} interleaved rounds)`);
      stores = await compareStores(ctx, token, redis.url);
      ctx.log(
        `replicas: part 2, the scale curve (each replica capped at ${csz.capCores} core, ${csz.rounds} interleaved rounds)`,
      );
      scale = await scaleCurve(ctx, token, redis.url, csz);
    } finally {
      await redis.stop();
    }
    const mem = summarizeStore(stores.memory);
    const red = summarizeStore(stores.redis);
    const one = scaleSummary(scale.samples, 1);
    const two = scaleSummary(scale.samples, 2);
    const besideTwin = scaleSummary(scale.samples, 1, true);
    // Replica A and its twin C together: two replicas that share nothing, on the machine as busy.
    const twinPair = median(
      scale.samples.filter((s) => s.twin).map((s) => s.tokensPerS + (s.twinTokensPerS ?? Number.NaN)),
    );
    // 2 ÷ 1 within each round (the two ran minutes apart at most): their spread is the figure's noise.
    const ratios = Array.from({ length: csz.rounds }, (_, i) => {
      const at = (n: 1 | 2): number =>
        scale.samples.find((x) => x.round === i && x.replicas === n && !x.twin)?.tokensPerS ?? Number.NaN;
      return round(at(2) / at(1));
    });
    const f = (label: string, value: number, unit: string): Figure => ({ label, value, unit });
    const twinFigures: Record<string, Figure> = csz.twin
      ? {
          scale_tps_1_twin: f(
            '1 replica beside its loaded twin (another cluster): tokens/s relayed',
            besideTwin.tokensPerS,
            'tokens/s',
          ),
          scale_ratio_vs_twin: f(
            '2 replicas ÷ 2 × (1 replica beside its twin): the machine equally busy',
            two.tokensPerS / (2 * besideTwin.tokensPerS),
            '×',
          ),
          scale_tps_twin_pair: f(
            'replica A and its twin together (2 clusters, nothing shared): tokens/s relayed',
            twinPair,
            'tokens/s',
          ),
          scale_ratio_vs_twin_pair: f(
            '2 replicas ÷ (A and its twin together): what sharing a cluster costs',
            two.tokensPerS / twinPair,
            '×',
          ),
        }
      : {};
    const storeLoad = ssz.relayLoad.clients * ssz.relayLoad.streamsPerClient;
    const scaleLoad = csz.loadPerReplica.clients * csz.loadPerReplica.streamsPerClient;
    return {
      method:
        `Two parts, one redis-server (Debian's, ${redis.url.replace(/:\d+\/0$/, '')}:<free port>, no persistence) started by the bench; every orchestratord a real child process. ` +
        `(1) In-process vs Redis: one orchestratord on each store (the Redis one with ORCHD_REDIS_URL, alone on its prefix), each with its own FIXTURE nodes, both up throughout and loaded in turn, ${ssz.rounds} rounds ` +
        'alternating which store goes first, after a discarded warm-up round on each. Per round and store: admission = autocannon, 10 connections, each POST /v2/tasks (a model whose pool is ready with 0 free slots, so the task queues) then its cancel, ' +
        `${ssz.admissionS} s (tasks/s = 202s ÷ duration; latency = each 202's response time); relay = ${storeLoad} concurrent /v2 streams in a closed loop (POST /v2/tasks, GET its events; ` +
        `${ssz.relayLoad.maxTokens} tokens a task, the next task as one ends) on 2 FIXTURE nodes streaming one token per ${STREAM_TOKEN_INTERVAL_MS} ms per stream, ${ssz.relayWindowS} s window: CPU per relayed token = ` +
        "orchestratord's CPU (per-thread schedstat) ÷ token frames the clients received, admission, dispatch, slot leases, heartbeats and task ends included; TTFT = POST /v2/tasks → first token frame, " +
        `${ssz.ttftPairs} tasks a round alternating with the same 2-token request sent straight to the FIXTURE node (its own TTFT), with no other load; added TTFT = median through orchestratord − median direct. ` +
        `(2) Scale curve: 2 orchestratord replicas on the Redis store (one prefix), each moved into a cgroup of its own capped at ${csz.capCores} core (${scale.mechanism}); nginx (${scale.nginx}, 1 worker, ` +
        'round-robin, keepalive upstreams) as the load balancer: one instance in front of replica A only, one in front of A and B. Each replica gets the same overload: ' +
        `${scaleLoad} concurrent streams per replica (${csz.loadPerReplica.clients} client processes each) in a closed loop of ${csz.loadPerReplica.maxTokens}-token tasks, the events in the admission response ` +
        '(POST /v2/tasks with Accept: text/event-stream: one request, so the balancer cannot send the events to the replica that does not have the task), on 4 FIXTURE nodes sending one token per ' +
        `${csz.tokenIntervalMs} ms per stream (${Math.round((scaleLoad * 1000) / csz.tokenIntervalMs).toLocaleString('en-US')} tokens/s offered per replica, more than a capped replica relays), registered and heartbeating through the 2-replica balancer. ` +
        `after a discarded ${csz.warmupS} s window on both replicas, ${csz.rounds} rounds alternate 1 and 2 replicas${csz.twin ? ' and a control, replica A alone in its cluster while a twin (replica C: its own Redis prefix, FIXTURE nodes, cap and nginx) relays the same load beside it, so the machine is as busy as with 2 replicas but nothing is shared' : ''} (the order reverses every round); tokens/s = token frames the clients received in a ${csz.windowS} s window after ${csz.settleS} s of load. ` +
        'FIXTURE nodes, nginx, redis-server and the load generator run outside the caps. Node heartbeats every 5 s (the product default) in both parts.',
      samples: {
        rounds: ssz.rounds,
        admissions: [...stores.memory, ...stores.redis].reduce((a, r) => a + r.admission.latenciesMs.length, 0),
        'tokens relayed':
          [...stores.memory, ...stores.redis].reduce((a, r) => a + r.relay.tokens, 0) +
          scale.samples.reduce((a, s) => a + s.tokens, 0),
        'scale rounds': csz.rounds,
      },
      figures: {
        cpu_per_token_ratio: f(
          'Redis ÷ in-process: orchestratord CPU per relayed token',
          red.cpuUsPerToken / mem.cpuUsPerToken,
          '×',
        ),
        cpu_per_token_memory: f('in-process store: CPU per relayed token', mem.cpuUsPerToken, 'µs'),
        cpu_per_token_redis: f('Redis store: CPU per relayed token', red.cpuUsPerToken, 'µs'),
        redis_admission_p99: f('Redis store: admission latency p99', red.admission.p99, 'ms'),
        memory_admission_p99: f('in-process store: admission latency p99', mem.admission.p99, 'ms'),
        redis_admission_tps: f('Redis store: tasks admitted per second (median round)', red.tasksPerS, 'tasks/s'),
        memory_admission_tps: f('in-process store: tasks admitted per second (median round)', mem.tasksPerS, 'tasks/s'),
        redis_ttft_added: f('Redis store: added TTFT over the FIXTURE node, p50', red.ttftAdded, 'ms'),
        memory_ttft_added: f('in-process store: added TTFT over the FIXTURE node, p50', mem.ttftAdded, 'ms'),
        scale_ratio: f(
          `2 replicas ÷ 1: tokens/s at ${csz.capCores} core each (median rounds)`,
          two.tokensPerS / one.tokensPerS,
          '×',
        ),
        scale_tps_1: f(`1 replica at ${csz.capCores} core: tokens/s relayed`, one.tokensPerS, 'tokens/s'),
        scale_tps_2: f(`2 replicas at ${csz.capCores} core each: tokens/s relayed`, two.tokensPerS, 'tokens/s'),
        ...twinFigures,
      },
      details: {
        store: {
          memory: { ...mem, admission: rounded(mem.admission) },
          redis: { ...red, admission: rounded(red.admission) },
          rounds: { memory: stores.memory.map(roundDetail), redis: stores.redis.map(roundDetail) },
          // Round i of each store ran back to back: the spread of these is the noise of the figure.
          cpu_per_token_ratio_by_round: stores.redis.map((r, i) =>
            round(r.relay.cpuUsPerToken / (stores.memory[i]?.relay.cpuUsPerToken ?? Number.NaN)),
          ),
        },
        scale: {
          cap_cores: csz.capCores,
          mechanism: scale.mechanism,
          nginx: scale.nginx,
          one: {
            ...one,
            cap_use_note:
              'CPU used ÷ window ÷ cap, median over replicas and rounds: near 1.0 = the cap is what limits the replica',
          },
          two,
          ...(csz.twin ? { beside_twin: besideTwin } : {}),
          ratio_by_round: ratios,
          samples: scale.samples,
        },
        load_avg_at_end: loadavg().map((l) => round(l, 2)),
      },
      notes: notes(
        red,
        mem,
        one,
        two,
        csz.capCores,
        csz.twin ? { ...besideTwin, pairTokensPerS: twinPair } : undefined,
        `${Math.min(...ratios).toFixed(2)}–${Math.max(...ratios).toFixed(2)}`,
      ),
    };
  },
};

function roundDetail(r: StoreRound): Record<string, unknown> {
  return {
    admission_tps: Math.round(r.admission.tasksPerS),
    admission_ms: rounded(summarize(r.admission.latenciesMs)),
    admission_cpu_us_per_task: Math.round(r.admission.cpuUsPerTask),
    admission_other_status: r.admission.other,
    relay_tokens_per_s: Math.round(r.relay.tokens / r.relay.seconds),
    relay_cpu_us_per_token: Math.round(r.relay.cpuUsPerToken * 100) / 100,
    relay_tasks_ended: r.relay.tasksEnded,
    relay_delay_ms: { p50: r.relay.delayP50Ms, p99: r.relay.delayP99Ms },
    relay_terminal: r.relay.terminal,
    ttft_ms: { direct: rounded(summarize(r.ttft.direct)), relayed: rounded(summarize(r.ttft.relayed)) },
  };
}

type ScaleSide = ReturnType<typeof scaleSummary>;

function notes(
  red: StoreSummary,
  mem: StoreSummary,
  one: ScaleSide,
  two: ScaleSide,
  cap: number,
  besideTwin: (ScaleSide & { pairTokensPerS: number }) | undefined,
  spread: string,
): string[] {
  const out = [
    'What is shared (.specs/65-cluster-store.md): with ORCHD_REDIS_URL the replicas share the admission queue, task records, sessions, node registry, slot leases, rate limits and the ' +
      "dashboard's activity. A task costs 5 store calls: admission 1 (one script reads the queue depth ahead and the session's pool and tokens, refuses a spent budget or a deadline " +
      "the queue ahead would miss, and writes the record, the queue entry and the session's start), dispatch 2 (one script takes the entry and moves the record to running; the slot lease), " +
      "end 2 (the slot lease's release; one script ends the record, removes a still queued entry and counts the session turn); the commands a replica sends in one event-loop turn leave in " +
      "one write. Every replica hears every lease signal, and a queue signal only when a model's first entry changes. Before (2f8b2ef): admission 2 round trips (a read script, then the " +
      'admit script), 2 queue signals a task. An A/B of the admission load alone, 2f8b2ef against this build alternating in one run (bench/src/tools/admission-ab.ts, nice -10, 09:43 UTC, ' +
      'load 15–17, 6 rounds of 5 s): 1,074 vs 1,380 tasks/s (median rounds), admission p50 5.0 vs 3.3 ms and p99 45.5 vs 28.0 ms, 390 vs 311 µs of orchestratord CPU per admitted (and ' +
      'cancelled) task, lower in all 6 rounds. On this shared 2-core VM the p99 moves with the other work on it by more than any of these changes: at load 15–17 the in-process store itself ' +
      'measured 10.9 ms and Redis 36 ms in one run (09:34), and the same build measured 8.9 and 29 ms 22 minutes apart at load 5–9 (06:11, 06:33). Earlier: before the lifecycle scripts ' +
      '(about a dozen calls a task) CPU per token 1.219× and Redis admission p99 11.5 ms (05:16 run); before the queue and task records were shared (03:56 run, load 11.4): 1.025×, 9.8 ms, scale 1.77×.',
    `The machine has 2 cores, so "each replica pinned to its own core, FIXTURE nodes on the rest" (issue 25) becomes a CFS quota of ${cap} core per replica (a cgroup each): the same per-process ` +
      'CPU for 1 and 2 replicas, while the FIXTURE nodes, nginx, redis-server and the clients share what is left. The ratio holds only while the replicas, not the rest, are the bottleneck: ' +
      `median cap use was ${one.capUse.toFixed(2)} (1 replica) and ${two.capUse.toFixed(2)} (2 replicas); well below 1.0 on the 2-replica side means the rest of the machine, not the replicas, set its figure. ` +
      `At the cap, a replica spent ${one.cpuUsPerToken.toFixed(1)} µs of CPU per relayed token alone and ${two.cpuUsPerToken.toFixed(1)} µs with two (median rounds): whatever the ratio misses of 2× is that difference. ` +
      (besideTwin === undefined
        ? "On 2 shared cores this run cannot tell the cluster's own cost from the doubled FIXTURE, nginx and client work slowing the replicas (the full run's twin control does)."
        : `The control: beside its twin (the machine as busy, nothing shared) replica A relayed ${Math.round(besideTwin.tokensPerS).toLocaleString('en-US')} tokens/s at ` +
          `${besideTwin.cpuUsPerToken.toFixed(1)} µs per token, so each replica of the 2-replica cluster relayed ${((two.tokensPerS / 2 / besideTwin.tokensPerS) * 100).toFixed(0)} % of what a replica ` +
          `does on an equally busy machine without sharing a cluster; A and its twin together relayed ${Math.round(besideTwin.pairTokensPerS).toLocaleString('en-US')} tokens/s, ` +
          `and the 2-replica cluster ${((two.tokensPerS / besideTwin.pairTokensPerS) * 100).toFixed(0)} % of that (the twin, started last, relays less than A: the pair is the fairer control). ` +
          `The 2 ÷ 1 ratio ranged ${spread} by round, so on this machine neither figure resolves a difference of less than about that spread.`) +
      ` Not the balancer: nginx used ${one.lbCores.toFixed(2)} core (1 replica) and ${two.lbCores.toFixed(2)} (2). Hearing the other replica is part of it: in the ` +
      `1-replica rounds replica B, in A's cluster but unloaded, used ${one.idlePeerMsPerS?.toFixed(1) ?? '?'} ms of CPU a second while A relayed (median), and ` +
      'bench/src/tools/listen-cost.ts (removed after 0df086b, figures in .specs/65-cluster-store.md; uncapped, 20 streams through A, about 21 tasks/s) measured such a B at 9–10 ms/s with A idle and 18–28 ms/s with A loaded, with 2 signals a task ' +
      '(a lease taken and given back), each waking every replica. Before the queue signals of a model with no other entry went (2 more a task) it measured 22–33 ms/s in 4 runs: ' +
      'within the noise of these.',
    'Before 79eb77a (2026-11-26) a task could leave the cluster queue only as the first of its model, even with slots free: a capped replica, throttled 90 ms in every 100, held ' +
      "the other replica's tasks of the model behind its own first one, and a queue signal alone blocked the model on the other replica for 250 ms. Now a task holding a slot lease passes " +
      'the tasks ahead of it when the pool has a free slot for each of them (.specs/65-cluster-store.md). The last run before (13:40 UTC): 1.70× (1 replica 3,376 tokens/s, 2 replicas 5,731; ' +
      '1.51–1.90 by round), 2 replicas at 80 % of the twin control; bench/src/tools/share-cost.ts (removed after 0df086b, figures in .specs/65-cluster-store.md; A capped at 0.1 core beside B in its cluster, or beside a twin, 6 rounds): ' +
      'A spent 1.13× and 1.19× the CPU per token sharing a cluster before (two runs), 0.99× after.',
    'Tokens the capped replica cannot read in time wait in the FIXTURE node and the socket buffers (a real engine does not slow down for the relay either), so a saturated replica reads several ' +
      'tokens per read: its CPU per token (in the JSON) is lower than in part 1, where the relay keeps up.',
    'An earlier run (2026-11-26 03:21 UTC, load 10.9, nice -10) capped each replica at 0.15 core with 24 streams per replica: 1 replica 4,133–4,403 tokens/s, 2 replicas 7,111–8,723, ratio 1.63 ' +
      '(median rounds; 1.62–1.98 by round) with both replicas at their cap but 34–42 µs of CPU per token with two against 34–36 alone; the 2-replica side doubles the FIXTURE, nginx and client ' +
      'work on 2 shared cores, hence the smaller cap here. With more cores, pin each replica (taskset) and raise BENCH_REPLICA_CPU.',
  ];
  if (red.errored + mem.errored > 0)
    out.push(
      `streams that ended other than with \`end\`: ${mem.errored} in-process, ${red.errored} Redis (see the JSON)`,
    );
  return out;
}
