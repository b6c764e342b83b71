import { loadavg } from 'node:os';
import { newToken } from '../lib/cluster.js';
import type { Bench, BenchContext } from '../lib/context.js';
import { UsageError } from '../errors.js';
import {
  adoptionMissing,
  adoptionTrial,
  ADOPT_MODEL,
  ADOPT_QUEUE_MODEL,
  type AdoptionTrial,
} from '../lib/failover-adopt.js';
import { HANG_MS, redisOutageTrial, type RedisOutageTrial } from '../lib/failover-redis.js';
import { rollingRestart, type RollingRestart } from '../lib/failover-rolling.js';
import { sigstopTrials } from '../lib/failover-sigstop.js';
import type { BenchOutcome, Figure } from '../lib/result.js';
import { round, rounded, summarize } from '../lib/stats.js';

/** Heartbeat interval of the replica trials (Redis outage, rolling restart, replica SIGKILL): nodes and replicas. */
const HEARTBEAT_MS = 1000;
const PARTS = ['sigstop', 'redis', 'rolling', 'adopt'] as const;
type Part = (typeof PARTS)[number];

function selectedParts(ctx: BenchContext): readonly Part[] {
  const asked = ctx.options.get('parts');
  if (asked === undefined) return PARTS;
  const parts = asked.split(',');
  for (const p of parts)
    if (!(PARTS as readonly string[]).includes(p))
      throw new UsageError(`failover: unknown part '${p}' (parts: ${PARTS.join(', ')})`);
  return PARTS.filter((p) => parts.includes(p));
}

const f = (label: string, value: number, unit: string, notMeasured?: string): Figure => ({
  label,
  value,
  unit,
  ...(notMeasured !== undefined ? { notMeasured } : {}),
});

function redisFigures(trials: readonly RedisOutageTrial[]): Record<string, Figure> {
  const first = summarize(
    trials.map((t) => (Number.isNaN(t.firstTypedMs) ? Number.POSITIVE_INFINITY : t.firstTypedMs)),
  );
  return {
    redis_first_503_max: f('Redis SIGKILL → first 503 STORE_UNAVAILABLE with Retry-After, max', first.max, 'ms'),
    redis_first_503_p50: f('Redis SIGKILL → first typed 503, p50', first.p50, 'ms'),
    redis_admission_hangs: f(
      `Admissions after the Redis kill unanswered for > ${HANG_MS} ms`,
      trials.reduce((a, t) => a + t.hangs, 0),
      'requests',
    ),
    redis_longest_wait: f(
      'Longest wait of an admission after the Redis kill',
      Math.max(...trials.map((t) => t.longestWaitAfterKillMs)),
      'ms',
    ),
    redis_resumed_p50: f(
      'Redis back (empty) → first 202 again, p50',
      summarize(trials.map((t) => t.resumedMs)).p50,
      'ms',
    ),
  };
}

function rollingFigures(r: RollingRestart): Record<string, Figure> {
  const ok = Object.values(r.ok).reduce((a, b) => a + b, 0);
  return {
    rolling_failed: f(
      'Failed requests in a rolling restart of 3 replicas (/v1 and /v2 load)',
      r.failed.length,
      'requests',
    ),
    rolling_served: f('Requests served during the rolling restart', ok, 'requests'),
    rolling_drain_max: f(
      'Rolling restart: SIGTERM → replica drained, max',
      Math.max(...r.restarts.map((x) => x.drainedMs)),
      'ms',
    ),
    rolling_ready_max: f(
      'Rolling restart: replica exit → ready again, max',
      Math.max(...r.restarts.map((x) => x.readyAfterExitMs)),
      'ms',
    ),
  };
}

function adoptFigures(
  trials: readonly AdoptionTrial[] | undefined,
  missing: string | undefined,
): Record<string, Figure> {
  if (trials === undefined || missing !== undefined) {
    const why = missing ?? 'part not run';
    return {
      resume_p50: f('Replica SIGKILL → clients resumed (first new token), p50', Number.NaN, 'intervals', why),
      resume_p99: f('Replica SIGKILL → clients resumed, p99', Number.NaN, 'intervals', why),
      queued_redistributed_max: f(
        'Replica SIGKILL → its queued tasks adopted by a survivor, max',
        Number.NaN,
        'intervals',
        why,
      ),
    };
  }
  const streams = trials.flatMap((t) => t.streams);
  // a queued task that had tokens before the kill was not queued when its replica died: it says nothing about redistribution
  const stillQueued = (t: AdoptionTrial): AdoptionTrial['queued'] => t.queued.filter((q) => q.tokensBeforeKill === 0);
  const queued = trials.flatMap(stillQueued);
  const iv = (ms: number): number => ms / HEARTBEAT_MS;
  const resumed = summarize(streams.map((s) => iv(s.resumedMs)));
  const faults =
    streams.reduce((a, s) => a + s.gaps + s.duplicates + (s.ends === 1 ? 0 : 1), 0) +
    trials.flatMap((t) => t.queued).filter((q) => q.ends !== 1).length;
  // start times and order only where every queued task was still queued at the kill
  const judged = trials.filter((t) => stillQueued(t).length === t.queued.length);
  const firstStart = judged.map((t) => Math.min(...stillQueued(t).map((q) => q.startMs)));
  const lastStart = judged.map((t) => Math.max(...stillQueued(t).map((q) => q.startMs)));
  return {
    resume_p50: f('Replica SIGKILL → clients resumed (first new token), p50', resumed.p50, 'intervals'),
    resume_p99: f('Replica SIGKILL → clients resumed, p99', resumed.p99, 'intervals'),
    queued_redistributed_max: f(
      'Replica SIGKILL → its queued tasks adopted by a survivor, max',
      Math.max(...queued.map((q) => iv(q.adoptedMs))),
      'intervals',
    ),
    queued_first_start_max: f(
      'Replica SIGKILL → first queued task started on a survivor (first token), max',
      iv(Math.max(...firstStart)),
      'intervals',
    ),
    queued_last_start_max: f(
      'Replica SIGKILL → last queued task started (4 in turn on 1 slot), max',
      iv(Math.max(...lastStart)),
      'intervals',
    ),
    streams_adopted_max: f(
      'Replica SIGKILL → its running streams adopted by a survivor, max',
      Math.max(...streams.map((x) => iv(x.adoptedMs))),
      'intervals',
    ),
    adopt_faults: f('Token gaps, duplicates, and tasks not ended exactly once', faults, 'faults'),
    queued_out_of_order: f(
      'Trials whose queued tasks started out of priority order',
      judged.filter((t) => t.startOrder.join() !== t.expectedOrder.join()).length,
      'trials',
    ),
  };
}

export const failoverBench: Bench = {
  name: 'failover',
  title:
    'Failure detection and recovery (SIGSTOP a pool-managerd; Redis outage, rolling restart and replica SIGKILL with 3 replicas)',
  targets: [
    { figure: 'offline_intervals_max', op: '<=', value: 3, unit: 'intervals' },
    { figure: 'restart_intervals_max', op: '<=', value: 3, unit: 'intervals' },
    { figure: 'redis_first_503_max', op: '<=', value: 1000, unit: 'ms' },
    { figure: 'redis_admission_hangs', op: '<=', value: 0, unit: 'requests' },
    { figure: 'rolling_failed', op: '<=', value: 0, unit: 'requests' },
    { figure: 'resume_p50', op: '<=', value: 2, unit: 'intervals' },
    { figure: 'resume_p99', op: '<=', value: 2, unit: 'intervals' },
    { figure: 'queued_redistributed_max', op: '<=', value: 2, unit: 'intervals' },
  ],
  async run(ctx: BenchContext): Promise<BenchOutcome> {
    const parts = selectedParts(ctx);
    const token = newToken();
    const figures: Record<string, Figure> = {};
    const details: Record<string, unknown> = { replica_heartbeat_ms: HEARTBEAT_MS };
    const samples: Record<string, number> = {};
    const methods: string[] = [];
    const notes: string[] = [];
    if (parts.includes('sigstop')) {
      const s = await sigstopTrials(ctx);
      Object.assign(figures, s.figures);
      details.sigstop = s.details;
      samples['SIGSTOP trials'] = s.samples.trials ?? 0;
      methods.push(`(1) SIGSTOP a pool-managerd: ${s.method}`);
      notes.push(...(s.notes ?? []));
    }
    if (parts.includes('redis')) {
      const count = ctx.quick ? 2 : 6;
      ctx.log(`failover: Redis outage, ${count} trials, heartbeat ${HEARTBEAT_MS} ms`);
      const trials: RedisOutageTrial[] = [];
      for (let t = 0; t < count; t++) {
        trials.push(await redisOutageTrial(ctx, token, HEARTBEAT_MS, t));
        const x = trials.at(-1) as RedisOutageTrial;
        ctx.log(
          `failover: Redis trial ${t + 1}: first typed 503 after ${Math.round(x.firstTypedMs)} ms (Retry-After ${x.retryAfter}), not ready after ${Math.round(x.notReadyMs)} ms, longest wait ${Math.round(x.longestWaitAfterKillMs)} ms, ${x.hangs} hang(s), back in ${Math.round(x.resumedMs)} ms; ${JSON.stringify(x.afterKill)}`,
        );
      }
      Object.assign(figures, redisFigures(trials));
      details.redis = {
        first_503_ms: rounded(summarize(trials.map((t) => t.firstTypedMs))),
        not_ready_ms: rounded(summarize(trials.map((t) => t.notReadyMs))),
        trials,
      };
      samples['Redis kills'] = count;
      methods.push(
        `(2) Redis outage, heartbeat ${HEARTBEAT_MS} ms: per trial fresh processes: redis-server (Debian's, no persistence), 2 orchestratord replicas on it, a FIXTURE node (64 slots) registered with one; 4 client loops (2 per replica) POST /v2/tasks back to back (a refusal is retried after 20 ms). After ~1 s plus a random heartbeat phase redis-server is SIGKILLed; the first 503 STORE_UNAVAILABLE carrying Retry-After (by arrival) times the outage's first typed answer; every answer to a request sent before redis-server returns counts, a request's wait from the later of its send and the kill is kept, and one over ${HANG_MS} ms (or abandoned at 5 s) is a hang. /readyz of one replica is polled every 20 ms. 2 s after the kill redis-server restarts empty on its port, and the next 202 times the recovery (nodes re-register on their next heartbeat). Figures over all trials.`,
      );
    }
    if (parts.includes('rolling')) {
      ctx.log(`failover: rolling restart of 3 replicas (llorch up --replicas 3), heartbeat ${HEARTBEAT_MS} ms`);
      const r = await rollingRestart(ctx, token, HEARTBEAT_MS, 2);
      Object.assign(figures, rollingFigures(r));
      details.rolling = {
        ...r,
        restarts: r.restarts.map((x) => ({ ...x, backInBalancerMs: Math.round(x.backInBalancerMs) })),
        durationMs: Math.round(r.durationMs),
      };
      samples['rolling restarts'] = r.restarts.length;
      methods.push(
        `(3) Rolling restart: \`llorch up --replicas 3\` (the built CLI: redis-server, 3 replicas, HAProxy with /readyz checks, pool-managerd with real llama-server and the synthetic model, requirements/cpu-dev.yaml: 1 pool, 2 slots), heartbeat ${HEARTBEAT_MS} ms. Steady load through HAProxy: 2 loops each of /v1/chat/completions (16 tokens), the same streamed, and /v2 (POST /v2/tasks, then its event stream to \`end\`), one request at a time per loop; any non-2xx answer, transport error or stream not ending normally is a failed request. Each replica in turn is SIGTERMed, and the next goes once llorch up has restarted it and HAProxy marked it UP. Drain and ready-again times are the replica's \`drained in\` and llorch up's \`restarted: ready N ms after it exited\` lines.`,
      );
      if (r.failed.length > 0) notes.push(`rolling restart failures: ${r.failed.slice(0, 5).join(' | ')}`);
    }
    let adopt: AdoptionTrial[] | undefined;
    // --adopt-anyway=1 (a diagnostic run) runs the trial on a build without adoption, to check the harness and see what that build does
    const missing = !parts.includes('adopt')
      ? 'part not run'
      : ctx.options.get('adopt-anyway') === '1'
        ? undefined
        : adoptionMissing(ctx.paths.orchestratord);
    if (parts.includes('adopt') && missing === undefined) {
      const count = ctx.quick ? 1 : 3;
      ctx.log(`failover: replica SIGKILL, ${count} trials, heartbeat ${HEARTBEAT_MS} ms`);
      adopt = [];
      for (let t = 0; t < count; t++) {
        adopt.push(await adoptionTrial(ctx, token, HEARTBEAT_MS, t, 4, 4));
        const x = adopt.at(-1) as AdoptionTrial;
        ctx.log(
          `failover: replica SIGKILL trial ${t + 1}: streams adopted ${x.streams.map((s) => Math.round(s.adoptedMs)).join('/')} ms, resumed ${x.streams.map((s) => Math.round(s.resumedMs)).join('/')} ms; queued adopted ${x.queued.map((q) => Math.round(q.adoptedMs)).join('/')} ms, started ${x.queued.map((q) => Math.round(q.startMs)).join('/')} ms in order ${x.startOrder.join(',')} (expected ${x.expectedOrder.join(',')})`,
        );
      }
      details.adopt = { model: ADOPT_MODEL, queue_model: ADOPT_QUEUE_MODEL, trials: adopt };
      const early = adopt.flatMap((t) => t.queued).filter((q) => q.tokensBeforeKill > 0).length;
      if (early > 0)
        notes.push(
          `${early} queued task(s) had started before the kill (the /v1 stream holding their pool ended first): their start times say nothing about redistribution`,
        );
      samples['replica kills'] = count;
    } else if (parts.includes('adopt')) {
      ctx.log(`failover: replica SIGKILL: not measured: ${missing}`);
      details.adopt = { not_measured: missing };
    }
    Object.assign(figures, adoptFigures(adopt, missing));
    methods.push(
      `(4) Replica SIGKILL, heartbeat ${HEARTBEAT_MS} ms: 3 replicas on one redis-server behind nginx (round-robin), one pool-managerd (real llama-server, ${ADOPT_MODEL}) registered through nginx with pool \`as\` (4 slots, continuous batching) and pool \`aq\` (1 slot, ${ADOPT_QUEUE_MODEL}, held by a /v1 stream through replica a). Replica a admits 4 long /v2 generations on \`as\` and then 4 /v2 tasks on \`aq\` (2 batch, then 2 interactive), so it owns them all; after ~1 s plus a random heartbeat phase it is SIGKILLed. Each client reconnects through nginx 100 ms after its stream broke with Last-Event-ID, as an EventSource would; resumed = kill → the first token frame on a connection opened after the kill, per stream; no gap or duplicate token index \`i\` and exactly one \`end\` per task; adopted = kill → the survivor's \`orphaned task adopted\` log line for the task (ms resolution); queued tasks started = kill → their first token (on one slot they run one after another, 8 tokens each), and their start order against interactive-then-batch, each by admission. 3 trials, fresh processes each. Runs only on a build with replica adoption (code outside the store implementations calls the task ownership store's \`lapsed\`, which finds orphaned tasks); otherwise the rows say not measured.`,
    );
    details.load_avg_at_end = loadavg().map((l) => round(l, 2));
    return { method: methods.join(' '), samples, figures, details, notes };
  },
};
