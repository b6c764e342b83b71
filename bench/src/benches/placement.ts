import { spawn } from 'node:child_process';
import { BenchError } from '../errors.js';
import type { Bench, BenchContext } from '../lib/context.js';
import type { BenchOutcome } from '../lib/result.js';

interface Summary {
  n: number;
  p50: number;
  p99: number;
  max: number;
}

interface PlacementReport {
  nodes: number;
  pools_per_node: number;
  candidates: number;
  models: number;
  pools_per_model: { min: number; max: number };
  decisions: number;
  registry_decisions: number;
  timer_overhead_us: number;
  decision_least_loaded_us: Summary;
  decision_round_robin_us: Summary;
  pump_step_us: Summary;
  registry_pools_us: Summary;
  flat_place_us: Summary;
  prefixes: number;
  decision_cache_aware_us: Summary;
  prefix_placed_us: Summary;
  prompt_blocks_us: Summary;
  [k: string]: unknown;
}

/** Runs orchestratord's own placement benchmark (it imports placement.ts; bench/ may not). */
async function runPlacementProcess(ctx: BenchContext): Promise<PlacementReport> {
  const args = [...(ctx.cpuProf ? ['--cpu-prof', `--cpu-prof-dir=${ctx.dir}`] : []), ctx.paths.placementBench];
  const env = {
    PATH: process.env.PATH ?? '',
    ...(ctx.quick ? { PLACEMENT_DECISIONS: '3000', PLACEMENT_REGISTRY_DECISIONS: '300', PLACEMENT_WARMUP: '500' } : {}),
  };
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (c: Buffer) => {
      out += c.toString('utf8');
    });
    child.stderr.on('data', (c: Buffer) => {
      err += c.toString('utf8');
    });
    child.once('exit', (code) => {
      if (code !== 0) {
        reject(new BenchError(`placement-bench exited ${code}: ${err}`));
        return;
      }
      try {
        resolve(JSON.parse(out.trim().split('\n').at(-1) ?? '') as PlacementReport);
      } catch (e) {
        reject(new BenchError(`placement-bench printed no JSON: ${out.slice(0, 500)}`, { cause: e }));
      }
    });
  });
}

export const placementBench: Bench = {
  name: 'placement',
  title: 'Placement at scale (1,000 nodes × 4 pools)',
  targets: [{ figure: 'decision_p99', op: '<=', value: 100, unit: 'µs' }],
  async run(ctx: BenchContext): Promise<BenchOutcome> {
    ctx.log('placement: node apps/orchestratord/dist/bench/placement-bench.js');
    const r = await runPlacementProcess(ctx);
    return {
      method:
        `apps/orchestratord/src/bench/placement-bench.ts (spawned from its dist) builds a real NodeRegistry of ${r.nodes} nodes × ` +
        `${r.pools_per_node} pools, registered and heartbeating with seeded random load (1–16 slots, random free slots, 90 % ready, ` +
        `some starting/draining/failed, ${r.models} models so ${r.pools_per_model.min}–${r.pools_per_model.max} pools per model, ` +
        '30 % deterministic, ctx 2k–8k, 1 % of nodes never heartbeat), and times, each call alone with process.hrtime.bigint() ' +
        `(timer overhead ${r.timer_overhead_us} µs), the decision as the scheduler's pump makes it: place(task, registry, strategy, cursor), ` +
        "i.e. the registry's per-model index lookup plus one pass over that model's pools, for random tasks (random model and ctx, " +
        '20 % strict, 10 % prefer, 10 % pin). Between decisions, untimed, one random node heartbeats new random load, assignments ' +
        'take leases (64 held, then released) and 1 % of the time a pool is marked saturated. ' +
        `${r.decisions.toLocaleString('en-US')} decisions per variant after a warm-up. Also: round-robin; the pump step (decision + ` +
        'lease, which updates the index); registry.pools() (the copy of all views that the pools and catalog routes and the pool gauges take; admission and queue metrics frames read the per-model index instead); ' +
        `and place() over all ${r.candidates.toLocaleString('en-US')} pools as a plain array with no index ` +
        `(${r.registry_decisions.toLocaleString('en-US')} samples each for the last two). cache-aware (the default strategy, ` +
        `.specs/68): the decision with a live prefix index, and the index's update once it assigns, for tasks whose prompts ` +
        `share one of ${r.prefixes} prefixes of 32 blocks (8 KiB) and add 4 blocks of their own; and hashing one such prompt ` +
        '(once per task).',
      samples: { decisions: r.decisions },
      figures: {
        decision_p50: {
          label: 'place() via the registry index, as pump() calls it, p50 (least-loaded)',
          value: r.decision_least_loaded_us.p50,
          unit: 'µs',
        },
        decision_p99: {
          label: 'place() via the registry index, as pump() calls it, p99 (least-loaded)',
          value: r.decision_least_loaded_us.p99,
          unit: 'µs',
        },
        round_robin_p99: { label: 'same, round-robin, p99', value: r.decision_round_robin_us.p99, unit: 'µs' },
        pump_step_p99: {
          label: 'pump step: decision + lease (index update), p99',
          value: r.pump_step_us.p99,
          unit: 'µs',
        },
        registry_pools_p99: {
          label: 'registry.pools() (copy of all views), p99',
          value: r.registry_pools_us.p99,
          unit: 'µs',
        },
        cache_aware_p50: {
          label: 'cache-aware (default): place() with a live prefix index, p50',
          value: r.decision_cache_aware_us.p50,
          unit: 'µs',
        },
        cache_aware_p99: {
          label: 'cache-aware (default): place() with a live prefix index, p99',
          value: r.decision_cache_aware_us.p99,
          unit: 'µs',
        },
        prefix_placed_p50: {
          label: 'cache-aware: the index update once a task is placed, p50',
          value: r.prefix_placed_us.p50,
          unit: 'µs',
        },
        prompt_blocks_p50: {
          label: 'hashing a 9 KiB prompt into 36 chained blocks (once per task), p50',
          value: r.prompt_blocks_us.p50,
          unit: 'µs',
        },
        flat_place_p99: {
          label: `place() over all ${r.candidates.toLocaleString('en-US')} pools as a plain array (no index), p99`,
          value: r.flat_place_us.p99,
          unit: 'µs',
        },
      },
      details: { report: r },
    };
  },
};
