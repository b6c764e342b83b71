import { readFileSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { Agent } from 'undici';
import { parse, stringify } from 'yaml';
import { launchDaemon, type FileLoggedDaemon } from '@llama-orch/daemon-support/daemon-launcher';
import { UsageError } from '../errors.js';
import { COLD_START_TIMEOUT_MS, newToken, startOrchestratord, waitNodeIdle, waitPoolsReady } from '../lib/cluster.js';
import { profFlags, type Bench, type BenchContext } from '../lib/context.js';
import { floodClient, type FloodRecord } from '../lib/flood-client.js';
import { judgeFlood } from '../lib/flood-judge.js';
import type { BenchOutcome, Figure } from '../lib/result.js';
import { round, rounded, summarize } from '../lib/stats.js';

const MODEL = 'synthetic';
const PROMPT = 'Once upon a time';
const HEARTBEAT_MS = 5000;
/** Rounds of 2 tasks at once (the dev pool's slots) before the flood: the cluster has served work like it, so predictions are measured. */
const WARMUP_ROUNDS = 3;

interface FloodShape {
  clients: number;
  deadlineMs: number;
  maxTokens: number;
  /** Floods per variant; with a baseline the order alternates (before after, after before, …). */
  trials: number;
}

function shape(ctx: BenchContext): FloodShape {
  const int = (name: string, fallback: number): number => {
    const v = ctx.options.get(name);
    if (v === undefined) return fallback;
    const n = Number(v);
    if (!Number.isInteger(n) || n < 1) throw new UsageError(`--${name}=${v}: a positive integer is expected`);
    return n;
  };
  // max_tokens 32: short tasks, as in issue 25's held-out flood (1,054 tasks ended within 74 s on the dev pool's 2 slots);
  // the /v2 default (1024) fills a slot's 512-token context: ~0.4 tasks/s here, a different regime (--max-tokens=1024).
  return {
    clients: int('clients', ctx.quick ? 100 : 3000),
    deadlineMs: int('deadline-ms', 120_000),
    maxTokens: int('max-tokens', 32),
    trials: int('trials', 1),
  };
}

/** orchestratord + one pool-managerd with `requirements/cpu-dev.yaml`, as `scripts/dev.sh up` runs them (ports, dirs and token are the run's). */
async function startDevCluster(
  ctx: BenchContext,
  variant: string,
  orchestratord: string,
): Promise<{ orch: FileLoggedDaemon; node: FileLoggedDaemon; token: string; nodeId: string }> {
  const dir = join(ctx.dir, variant);
  await mkdir(dir, { recursive: true });
  const token = newToken();
  const orch = await startOrchestratord({
    paths: { ...ctx.paths, orchestratord },
    dir,
    token,
    heartbeatMs: HEARTBEAT_MS,
    nofile: 20_000,
    nodeFlags: profFlags(ctx, `flood-${variant}-orchestratord`),
  });
  const config = parse(readFileSync(join(ctx.paths.root, 'requirements', 'cpu-dev.yaml'), 'utf8')) as Record<
    string,
    Record<string, unknown>
  >;
  config.node = { ...config.node, addr: '127.0.0.1:0' };
  config.orchestrator = { ...config.orchestrator, url: orch.url };
  const configPath = join(dir, 'pool-managerd.yaml');
  await writeFile(
    configPath,
    stringify({ ...config, api_token: token, runtime_dir: join(dir, 'node'), cache_dir: ctx.paths.cacheDir }),
  );
  const node = await launchDaemon(
    {
      name: `pool-managerd:${variant}`,
      script: ctx.paths.poolManagerd,
      args: ['--config', configPath],
      output: { file: join(dir, 'pool-managerd.log') },
      envMode: 'minimal',
      env: { LOG_LEVEL: 'info' },
      nodeFlags: profFlags(ctx, `flood-${variant}-pool-managerd`),
    },
    { timeoutMs: 60_000 },
  );
  return { orch, node, token, nodeId: String(config.node.id) };
}

interface VariantSummary {
  variant: string;
  orchestratord: string;
  load_avg_before: number[];
  load_avg_after: number[];
  counts: Record<string, number>;
  refusals_by_code: Record<string, number>;
  admitted_outcomes: Record<string, number>;
  deadline_refusals: number;
  false_refusals: number;
  latest_end_after_admission_ms: number;
  flood_span_ms: number;
  throughput_tasks_per_s: number;
  judge: { gap_ms: number; service_ms: number };
  refused_predicted_end_ms: ReturnType<typeof rounded> | undefined;
  refused_predicted_start_ms: ReturnType<typeof rounded> | undefined;
  /** Admitted tasks: actual (first token − admission) ÷ predicted_start_ms, where predicted ≥ 1 s. */
  start_actual_over_predicted: ReturnType<typeof rounded> | undefined;
  tokens_per_task: ReturnType<typeof rounded> | undefined;
}

function tally(values: readonly string[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const v of values) out[v] = (out[v] ?? 0) + 1;
  return out;
}

function summarizeVariant(
  variant: string,
  orchestratord: string,
  records: readonly FloodRecord[],
  flood: FloodShape,
  load: { before: number[]; after: number[] },
): VariantSummary {
  const admitted = records.filter((r) => r.status === 200);
  const refused = records.filter((r) => r.status !== undefined && r.status !== 200);
  const deadline = refused.filter((r) => r.outcome === 'DEADLINE_UNMET');
  const normal = admitted.filter((r) => r.outcome === 'end' && r.ended_at !== undefined);
  const judged = judgeFlood(
    admitted.map((r) => ({
      admittedAt: r.responded_at as number,
      endedAt: r.outcome === 'end' ? r.ended_at : undefined,
    })),
    deadline.map((r) => r.responded_at as number),
    flood.deadlineMs,
  );
  const ends = normal.map((r) => r.ended_at as number);
  const spanMs = ends.length === 0 ? 0 : Math.max(...ends);
  const ratios = admitted
    .filter((r) => r.predicted_start_ms !== undefined && r.predicted_start_ms >= 1000 && r.first_token_at !== undefined)
    .map((r) => ((r.first_token_at as number) - (r.responded_at as number)) / (r.predicted_start_ms as number));
  const refusedEnds = deadline.flatMap((r) => (r.refused_end_ms === undefined ? [] : [r.refused_end_ms]));
  const refusedStarts = deadline.flatMap((r) => (r.refused_start_ms === undefined ? [] : [r.refused_start_ms]));
  const tokens = normal.flatMap((r) => (r.tokens === undefined ? [] : [r.tokens]));
  return {
    variant,
    orchestratord,
    load_avg_before: load.before,
    load_avg_after: load.after,
    counts: {
      clients: records.length,
      admitted: admitted.length,
      refused: refused.length,
      transport_errors: records.filter((r) => r.transport_error !== undefined).length,
      finished: normal.length,
      admitted_not_finished: admitted.length - normal.length,
    },
    refusals_by_code: tally(refused.map((r) => r.outcome ?? 'unknown')),
    admitted_outcomes: tally(admitted.map((r) => r.outcome ?? 'no terminal frame')),
    deadline_refusals: deadline.length,
    false_refusals: judged.falseRefusals,
    latest_end_after_admission_ms:
      normal.length === 0
        ? Number.NaN
        : Math.round(Math.max(...normal.map((r) => (r.ended_at as number) - (r.responded_at as number)))),
    flood_span_ms: Math.round(spanMs),
    throughput_tasks_per_s: spanMs === 0 ? Number.NaN : round((normal.length * 1000) / spanMs, 2),
    judge: { gap_ms: round(judged.gapMs, 2), service_ms: round(judged.serviceMs, 1) },
    refused_predicted_end_ms: refusedEnds.length === 0 ? undefined : rounded(summarize(refusedEnds), 0),
    refused_predicted_start_ms: refusedStarts.length === 0 ? undefined : rounded(summarize(refusedStarts), 0),
    start_actual_over_predicted: ratios.length === 0 ? undefined : rounded(summarize(ratios), 3),
    tokens_per_task: tokens.length === 0 ? undefined : rounded(summarize(tokens), 1),
  };
}

/** The variant's trials added up (latest end: the latest of them). */
function totals(runs: readonly VariantSummary[]): Totals {
  const sum = (f: (s: VariantSummary) => number): number => runs.reduce((n, s) => n + f(s), 0);
  return {
    false_refusals: sum((s) => s.false_refusals),
    deadline_refusals: sum((s) => s.deadline_refusals),
    admitted: sum((s) => s.counts.admitted ?? 0),
    finished: sum((s) => s.counts.finished ?? 0),
    refused: sum((s) => s.counts.refused ?? 0),
    transport_errors: sum((s) => s.counts.transport_errors ?? 0),
    admitted_not_finished: sum((s) => s.counts.admitted_not_finished ?? 0),
    latest_end_after_admission_ms: Math.max(...runs.map((s) => s.latest_end_after_admission_ms)),
  };
}

interface Totals {
  false_refusals: number;
  deadline_refusals: number;
  admitted: number;
  finished: number;
  refused: number;
  transport_errors: number;
  admitted_not_finished: number;
  latest_end_after_admission_ms: number;
}

async function runVariant(
  ctx: BenchContext,
  variant: string,
  run: string,
  orchestratord: string,
  flood: FloodShape,
): Promise<VariantSummary> {
  const { orch, node, token, nodeId } = await startDevCluster(ctx, run, orchestratord);
  // Connecting may wait long: thousands of connects at once overflow the listen backlog (SYNs are retried).
  const agent = new Agent({
    connections: flood.clients + 8,
    keepAliveTimeout: 60_000,
    headersTimeout: 0,
    bodyTimeout: 0,
    connect: { timeout: flood.deadlineMs },
  });
  try {
    await waitPoolsReady(orch.url, token, ['cpu0'], [orch, node], COLD_START_TIMEOUT_MS);
    const t0 = performance.now();
    const now = (): number => performance.now() - t0;
    const client = {
      url: orch.url,
      token,
      model: MODEL,
      prompt: PROMPT,
      maxTokens: flood.maxTokens,
      deadlineMs: flood.deadlineMs,
      dispatcher: agent,
      now,
    };
    for (let i = 0; i < WARMUP_ROUNDS; i++) {
      for (const w of await Promise.all([floodClient(client), floodClient(client)])) {
        if (w.outcome !== 'end')
          throw new Error(`warm-up task ended ${w.outcome ?? w.transport_error ?? 'without a terminal frame'}`);
      }
    }
    await waitNodeIdle(orch.url, token, nodeId, 30_000);
    ctx.log(
      `flood ${run}: ${flood.clients} clients at once (deadline ${flood.deadlineMs} ms, max_tokens ${flood.maxTokens}); load ${loadavg()
        .map((l) => l.toFixed(2))
        .join(' ')}`,
    );
    const before = loadavg().map((l) => round(l, 2));
    const start = performance.now();
    const floodNow = (): number => performance.now() - start;
    const records = await Promise.all(
      Array.from({ length: flood.clients }, () => floodClient({ ...client, now: floodNow })),
    );
    const after = loadavg().map((l) => round(l, 2));
    await writeFile(join(ctx.dir, run, 'records.json'), JSON.stringify(records));
    const s = summarizeVariant(variant, orchestratord, records, flood, { before, after });
    ctx.log(
      `flood ${run}: admitted ${s.counts.admitted}, refused ${JSON.stringify(s.refusals_by_code)}, finished ${s.counts.finished}, ` +
        `DEADLINE_UNMET refusals that would have met their deadline ${s.false_refusals} of ${s.deadline_refusals}; latest end ${s.latest_end_after_admission_ms} ms after admission`,
    );
    return s;
  } finally {
    await agent.close().catch(() => undefined);
    await node.stop();
    await orch.stop();
  }
}

export const floodBench: Bench = {
  name: 'flood',
  title:
    'Flood: N concurrent clients, one task each with a deadline; DEADLINE_UNMET refusals that would have met it (dev cluster, real llama-server)',
  targets: [{ figure: 'false_refusals', op: '<=', value: 0, unit: 'tasks' }],
  async run(ctx: BenchContext): Promise<BenchOutcome> {
    const flood = shape(ctx);
    const baseline = ctx.options.get('baseline') ?? process.env.LLORCH_BENCH_BASELINE_ORCHESTRATORD;
    const variants: Array<[string, string]> = [
      ...(baseline !== undefined && baseline !== '' ? [['before', baseline] as [string, string]] : []),
      ['after', ctx.paths.orchestratord],
    ];
    const summaries: VariantSummary[] = [];
    for (let trial = 0; trial < flood.trials; trial++) {
      const order = trial % 2 === 0 ? variants : [...variants].reverse();
      for (const [name, path] of order)
        summaries.push(await runVariant(ctx, name, `${name}-${trial + 1}`, path, flood));
    }
    const after = totals(summaries.filter((s) => s.variant === 'after'));
    const before = variants.length > 1 ? totals(summaries.filter((s) => s.variant === 'before')) : undefined;
    const figures: Record<string, Figure> = {
      false_refusals: {
        label: 'DEADLINE_UNMET refusals that would have met their deadline',
        value: after.false_refusals,
        unit: 'tasks',
      },
      deadline_refusals: { label: 'DEADLINE_UNMET refusals', value: after.deadline_refusals, unit: 'tasks' },
      admitted: { label: 'admitted', value: after.admitted, unit: 'tasks' },
      finished: { label: 'admitted and finished', value: after.finished, unit: 'tasks' },
      refused_other: {
        label: 'refused otherwise (queue full …)',
        value: after.refused - after.deadline_refusals,
        unit: 'tasks',
      },
      transport_errors: {
        label: 'clients that got no answer (connection failed)',
        value: after.transport_errors,
        unit: 'tasks',
      },
      admitted_missed: {
        label: 'admitted but not finished (expired in the queue, timed out)',
        value: after.admitted_not_finished,
        unit: 'tasks',
      },
      latest_end: {
        label: `latest end after admission (deadline ${flood.deadlineMs / 1000} s)`,
        value: after.latest_end_after_admission_ms / 1000,
        unit: 's',
      },
    };
    if (before !== undefined) {
      figures.false_refusals_before = {
        label: "before (main's predictor): DEADLINE_UNMET refusals that would have met their deadline",
        value: before.false_refusals,
        unit: 'tasks',
      };
      figures.deadline_refusals_before = {
        label: 'before: DEADLINE_UNMET refusals',
        value: before.deadline_refusals,
        unit: 'tasks',
      };
      figures.admitted_before = { label: 'before: admitted', value: before.admitted, unit: 'tasks' };
      figures.finished_before = { label: 'before: admitted and finished', value: before.finished, unit: 'tasks' };
      figures.admitted_missed_before = {
        label: 'before: admitted but not finished',
        value: before.admitted_not_finished,
        unit: 'tasks',
      };
      figures.latest_end_before = {
        label: 'before: latest end after admission',
        value: before.latest_end_after_admission_ms / 1000,
        unit: 's',
      };
    }
    return {
      method:
        `${flood.clients} clients at once, each one POST /v2/tasks (model '${MODEL}', prompt '${PROMPT}', max_tokens ${flood.maxTokens}, ` +
        `deadline_ms ${flood.deadlineMs}, interactive; Accept: text/event-stream, read to the terminal frame) against orchestratord and one ` +
        'pool-managerd with requirements/cpu-dev.yaml (real llama-server, synthetic model, 2 slots), as `scripts/dev.sh up` runs them, after ' +
        `${WARMUP_ROUNDS} warm-up rounds of 2 tasks at once (the pool's slots). Times are the client's (response headers = admission). ` +
        'Admissions and DEADLINE_UNMET refusals are replayed in response order; a refusal would have ended one mean finish interval (gap) ' +
        "after the task last in the queue (at least the fastest tenth's median admit→end after it was refused), and counts when that is " +
        'within deadline_ms: it is then put back in the queue (the next refusals queue behind it, later admitted tasks end one gap later); ' +
        'behind an admitted task that did not end normally nothing would have made it (bench/src/lib/flood-judge.ts). ' +
        (before !== undefined
          ? `Before = the baseline orchestratord build (--baseline), after = this checkout, each flood on a fresh cluster; ${flood.trials} flood(s) each, ` +
            'in the order before after, after before, …; figures add the floods up (latest end: the latest).'
          : ''),
      samples: { floods: summaries.length, clients_per_flood: flood.clients },
      figures,
      details: {
        flood,
        warmup_rounds: WARMUP_ROUNDS,
        totals: { after, ...(before !== undefined ? { before } : {}) },
        floods: summaries,
      },
      notes: [
        'predicted_start_ms accuracy: details.floods[].start_actual_over_predicted (first token − admission ÷ predicted start, admitted tasks predicted ≥ 1 s).',
      ],
    };
  },
};
