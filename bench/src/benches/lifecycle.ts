import { stat } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import type { FileLoggedDaemon } from '@llama-orch/daemon-support/daemon-launcher';
import { BenchError } from '../errors.js';
import {
  COLD_START_TIMEOUT_MS,
  newToken,
  startOrchestratord,
  startPoolManagerd,
  waitPoolsReady,
  type PoolManagerdHandle,
} from '../lib/cluster.js';
import { profFlags, type Bench, type BenchContext } from '../lib/context.js';
import {
  coldSample,
  directSample,
  firstLoad,
  projectionRow,
  waitNodeOnline,
  type OnDemandCluster,
  type ProjectionRow,
} from '../lib/lifecycle-cold.js';
import {
  coldDetails,
  coldFigures,
  lifecycleNotes,
  mib,
  projectionDetails,
  projectionFigures,
  swapFigures,
  type ColdResult,
} from '../lib/lifecycle-report.js';
import {
  GIVE_UP_MS,
  SWAP_MAX_TOKENS,
  summarizeBlocks,
  swapBlock,
  type SwapBlock,
  type SwapMode,
  type SwapSetup,
  type SwapSummary,
  type SwapTarget,
} from '../lib/lifecycle-swaps.js';
import { registerModel, type BenchModel } from '../lib/on-demand.js';
import type { BenchOutcome, Figure } from '../lib/result.js';
import { rounded, summarize } from '../lib/stats.js';

/**
 * `pnpm bench lifecycle` (issue 40): models on demand, measured. (1) A cold load through
 * orchestratord (a catalog model cached on the node, loaded nowhere: request → first token)
 * against the same engine started directly, two model sizes; (2) three models alternating on a
 * node whose budget fits two, against three static pools; (3) the node's memory projection
 * against the engine's resident size.
 */

const CTX = 2048;
const HEARTBEAT_MS = 1000;
const MiB = 1024 * 1024;

/** The two sizes of the cold load: the default synthetic model and a ~64 MiB f16 one (as bench/src/tools/model-swap-study.ts's s and m). */
const COLD_MODELS: readonly BenchModel[] = [
  { name: 's', ref: 'synthetic:llama', alias: 'life-s' },
  { name: 'm', ref: 'synthetic:llama?layers=4&embd=512&heads=8&ff=2048&ctx=4096&type=f16', alias: 'life-m' },
];
/** The three models of the swaps: the default shape, other seeds (other files). */
const SWAP_MODELS: readonly BenchModel[] = ['a', 'b', 'c'].map((name, i) => ({
  name,
  ref: `synthetic:llama?seed=${i + 1}`,
  alias: `swap-${name}`,
}));

interface Cluster {
  orch: FileLoggedDaemon;
  node: PoolManagerdHandle;
}

async function stopCluster(c: Cluster | undefined): Promise<void> {
  await c?.node.daemon.stop();
  await c?.orch.stop();
}

async function startCluster(
  ctx: BenchContext,
  name: string,
  token: string,
  node: { onDemandBudget?: number; pools?: readonly BenchModel[] },
): Promise<Cluster> {
  const orch = await startOrchestratord({
    paths: ctx.paths,
    dir: ctx.dir,
    token,
    heartbeatMs: HEARTBEAT_MS,
    name: `orchestratord-${name}`,
    nodeFlags: profFlags(ctx, `orchestratord-${name}`),
  });
  try {
    const pm = await startPoolManagerd({
      paths: ctx.paths,
      dir: ctx.dir,
      nodeId: `life-${name}`,
      token,
      orchestratorUrl: orch.url,
      heartbeatMs: HEARTBEAT_MS,
      pools: (node.pools ?? []).map((m) => ({
        id: `static-${m.name}`,
        model: m.ref,
        aliases: [m.alias],
        ctx: CTX,
        determinism: false,
      })),
      ...(node.onDemandBudget !== undefined
        ? { onDemand: { memoryBudgetBytes: node.onDemandBudget, threads: 1 } }
        : {}),
      nodeFlags: profFlags(ctx, `pool-managerd-${name}`),
      timeoutMs: COLD_START_TIMEOUT_MS,
    });
    return { orch, node: pm };
  } catch (err) {
    await orch.stop();
    throw err;
  }
}

const odCluster = (c: Cluster, token: string): OnDemandCluster => ({
  orchUrl: c.orch.url,
  token,
  node: c.node,
  orchLogs: () => c.orch.logs(),
});

/** Part 1 and 3 on one on-demand node with room for everything. */
async function coldPart(
  ctx: BenchContext,
  token: string,
  rounds: number,
): Promise<{ cold: ColdResult[]; projection: ProjectionRow[]; warmup: Record<string, number> }> {
  let cluster: Cluster | undefined;
  try {
    cluster = await startCluster(ctx, 'cold', token, { onDemandBudget: 16 * 1024 * MiB });
    await waitNodeOnline(cluster.orch.url, token, cluster.node.nodeId, 30_000);
    const c = odCluster(cluster, token);
    for (const m of [...COLD_MODELS, ...SWAP_MODELS]) await registerModel(c.orchUrl, token, m, CTX);
    // Uncounted: the first load of a model generates its file into the cache (and may build the engine).
    ctx.log(
      `lifecycle: first load of each of ${COLD_MODELS.length + SWAP_MODELS.length} models (generates them; not counted)`,
    );
    const warmup: Record<string, number> = {};
    const cold: ColdResult[] = [];
    for (const m of [...COLD_MODELS, ...SWAP_MODELS]) {
      const w = await firstLoad(c, m, COLD_START_TIMEOUT_MS);
      warmup[m.name] = Math.round(w.ms);
      const modelPath = w.argv[w.argv.indexOf('-m') + 1] ?? w.argv[w.argv.indexOf('--model') + 1];
      const fileBytes = modelPath !== undefined ? (await stat(modelPath)).size : Number.NaN;
      if (COLD_MODELS.includes(m)) cold.push({ model: m, fileBytes, argv: w.argv, orch: [], direct: [] });
    }
    ctx.log(`lifecycle: cold loads, ${rounds} interleaved pairs per model (through orchestratord, engine alone)`);
    for (let i = 1; i <= rounds; i++) {
      for (const r of cold) {
        for (const v of i % 2 === 0 ? ['orch', 'direct'] : ['direct', 'orch']) {
          if (v === 'orch') r.orch.push(await coldSample(c, r.model));
          else r.direct.push(await directSample(ctx.dir, r.argv, `${r.model.name}-${r.direct.length}`));
          await sleep(200);
        }
      }
    }
    ctx.log('lifecycle: projected memory against the engines’ resident size');
    const projection: ProjectionRow[] = [];
    for (const m of [...COLD_MODELS, ...SWAP_MODELS]) projection.push(await projectionRow(c, m));
    return { cold, projection, warmup };
  } finally {
    await stopCluster(cluster);
  }
}

/** The budget of the swap node: two of the models as they run (the larger of projection and RSS), plus half of one. */
function swapBudget(rows: readonly ProjectionRow[]): { budget: number; need: number; projected: number } {
  const swapRows = rows.filter((r) => SWAP_MODELS.some((m) => m.name === r.model));
  const need = Math.max(
    ...swapRows.map((r) => Math.max(r.projected_bytes, r.reported_bytes ?? 0, r.rss_after_fill_bytes)),
  );
  const projected = Math.min(...swapRows.map((r) => r.projected_bytes));
  return { budget: Math.ceil(2 * need + 0.5 * projected), need, projected };
}

/** Part 2: both setups up at once; per round, each mode's blocks in alternating setup order. */
async function swapPart(
  ctx: BenchContext,
  token: string,
  budget: number,
  rounds: number,
  perClient: Record<SwapMode, number>,
): Promise<SwapBlock[]> {
  let od: Cluster | undefined;
  let st: Cluster | undefined;
  try {
    od = await startCluster(ctx, 'swap', token, { onDemandBudget: budget });
    st = await startCluster(ctx, 'static', token, { pools: SWAP_MODELS });
    await waitNodeOnline(od.orch.url, token, od.node.nodeId, 30_000);
    for (const m of SWAP_MODELS) await registerModel(od.orch.url, token, m, CTX);
    await waitPoolsReady(
      st.orch.url,
      token,
      SWAP_MODELS.map((m) => `static-${m.name}`),
      [st.orch, st.node.daemon],
      COLD_START_TIMEOUT_MS,
    );
    const targets: Record<SwapSetup, SwapTarget> = {
      'on-demand': {
        setup: 'on-demand',
        orchUrl: od.orch.url,
        token,
        nodeUrl: od.node.daemon.url,
        orchLogs: () => od?.orch.logs() ?? [],
      },
      static: { setup: 'static', orchUrl: st.orch.url, token },
    };
    // Uncounted: one pass over the models on each (the on-demand node loads two and swaps once).
    for (const s of ['on-demand', 'static'] as const)
      await swapBlock(targets[s], SWAP_MODELS, 'sequential', SWAP_MODELS.length, 0);
    const blocks: SwapBlock[] = [];
    for (let r = 1; r <= rounds; r++) {
      for (const mode of ['sequential', 'concurrent'] as const) {
        for (const s of r % 2 === 1 ? (['on-demand', 'static'] as const) : (['static', 'on-demand'] as const)) {
          const b = await swapBlock(targets[s], SWAP_MODELS, mode, perClient[mode], r);
          const ok = b.requests.filter((q) => q.ok).length;
          ctx.log(
            `lifecycle: round ${r} ${mode} ${s}: ${ok}/${b.requests.length} ok in ${(b.wallMs / 1000).toFixed(1)} s` +
              (b.counters !== undefined
                ? `, loads ${JSON.stringify(b.counters.loads)}, unloads ${b.counters.unloads}`
                : ''),
          );
          blocks.push(b);
        }
      }
    }
    return blocks;
  } finally {
    await stopCluster(od);
    await stopCluster(st);
  }
}

export const lifecycleBench: Bench = {
  name: 'lifecycle',
  title: 'Models on demand: cold load, swaps, memory projection',
  targets: [
    { figure: 'cold_s_added_p50', op: '<=', value: 150, unit: 'ms' },
    { figure: 'cold_m_added_p50', op: '<=', value: 150, unit: 'ms' },
  ],
  async run(ctx: BenchContext): Promise<BenchOutcome> {
    const token = newToken();
    const coldRounds = ctx.quick ? 3 : 20;
    const swapRounds = ctx.quick ? 1 : 3;
    const perClient: Record<SwapMode, number> = ctx.quick
      ? { sequential: 6, concurrent: 3 }
      : { sequential: 12, concurrent: 6 };

    const { cold, projection, warmup } = await coldPart(ctx, token, coldRounds);
    const { budget, need, projected } = swapBudget(projection);
    if (3 * projected <= budget)
      throw new BenchError(`a swap budget of ${budget} B fits all three models (projection ${projected} B each)`);
    ctx.log(
      `lifecycle: swap node budget ${mib(budget)} MiB (each model ${mib(projected)} MiB projected, ${mib(need)} MiB at most as it ran)`,
    );
    const blocks = await swapPart(ctx, token, budget, swapRounds, perClient);

    const summaries: Record<string, SwapSummary> = {};
    for (const setup of ['on-demand', 'static'] as const)
      for (const mode of ['sequential', 'concurrent'] as const)
        summaries[`${setup}/${mode}`] = summarizeBlocks(blocks.filter((b) => b.setup === setup && b.mode === mode));

    const figures: Record<string, Figure> = {};
    for (const r of cold) Object.assign(figures, coldFigures(r));
    Object.assign(figures, swapFigures(summaries));
    Object.assign(figures, projectionFigures(projection));
    const notes = lifecycleNotes(cold, summaries);

    return {
      method:
        `(1) Cold load: orchestratord + one pool-managerd with on_demand (budget 16 GiB, engines -t 1) and no YAML pool, heartbeats every ${HEARTBEAT_MS} ms; ` +
        'each model registered in the catalog (POST /v2/catalog/models, ctx 2048, 1 slot, idle_ttl_s 0) and loaded once uncounted ' +
        '(POST /v2/catalog/models/{id}/load until ready, then unloaded: that generates the synthetic file into the cache). A sample = a ' +
        "streamed 1-token POST /v1/completions naming the model's alias while no copy is loaded (load on first request) → its first " +
        'choice frame; then POST /v2/catalog/models/{id}/unload (deadline 0), waited until GET /v2/pools drops the pool and the engine ' +
        'exited. Against it, interleaved (order alternating per round), the same llama-server binary with the argv the node gave it ' +
        '(/proc/<pid>/cmdline, --port replaced) spawned directly: spawn → /health 200 (2 ms polls) → the same streamed 1-token ' +
        `/v1/completions → first choice frame. ${coldRounds} pairs per model; added = orchestratord − direct per pair, p50 and p90 of the ` +
        "pairs. The model file is in the page cache for both. Phases (details) from both daemons' log lines (pino times) and the " +
        "engine's own log clock. " +
        '(2) Swaps: three models of the default synthetic shape (seeds 1–3), on a node whose on_demand budget is 2 × the most one took ' +
        "running (max of projection, the node's memory_bytes and VmRSS in part 3) + half a projection, so two fit and a third needs an " +
        'eviction; against a second cluster whose node serves each model from a YAML pool of its own (always loaded), both up at once. ' +
        `Requests: non-streamed POST /v1/completions of ${SWAP_MAX_TOKENS} tokens naming A, B, C in turn — one client ` +
        `(${perClient.sequential} requests a block), and three clients at once (${perClient.concurrent} each, client k starting at model k) — ` +
        `${swapRounds} rounds, each mode's two setups in alternating order, after one uncounted pass. A 503/429 with Retry-After is ` +
        `retried after it and counted (latency from the first attempt); no answer within ${GIVE_UP_MS / 1000} s or any other status is a ` +
        "failure. Loads (swaps) and unloads from the node's llorch_pool_loads_total{outcome} and llorch_pool_unloads_total around each " +
        "block; evictions from orchestratord's `model copy unloading` lines, busy when a task placed on the copy had not ended " +
        "(its `task placed`/`task ended` lines); loads with nothing evictable from its `model waits for room` lines (the model's " +
        'tasks stay queued until a copy may go). (3) Projection: one more cold load per model, then a non-streamed request whose ' +
        'prompt fills a 512-token micro-batch (~600 tokens) or, for the default synthetic shape, the 256-token slot llama-server caps ' +
        "it to (its training context); projected = memory_bytes of the node's `pool load accepted` line (the model was on the host: " +
        "projected before the engine), measured = VmRSS of /proc/<engine pid>/status (PID file in the node's runtime dir); error = " +
        '(projected − RSS) ÷ RSS.',
      samples: {
        cold_pairs_per_model: coldRounds,
        swap_requests: blocks.reduce((n, b) => n + b.requests.length, 0),
        projection_models: projection.length,
      },
      figures,
      details: {
        cold: coldDetails(cold),
        first_loads_ms: warmup,
        swap: {
          budget_bytes: budget,
          model_need_bytes: need,
          model_projected_bytes: projected,
          summaries: Object.fromEntries(
            Object.entries(summaries).map(([k, x]) => [k, { ...x, ms: rounded(summarize(x.ms), 1) }]),
          ),
          blocks: blocks.map((b) => ({
            setup: b.setup,
            mode: b.mode,
            round: b.round,
            wall_ms: Math.round(b.wallMs),
            counters: b.counters,
            catalog: b.catalog,
            failed: b.requests.filter((q) => !q.ok).map((q) => `${q.model}: ${q.error ?? ''}`),
          })),
        },
        projection: projectionDetails(projection),
      },
      notes,
    };
  },
};
