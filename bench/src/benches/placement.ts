import { spawn } from 'node:child_process';
import { BenchError } from '../errors.js';
import type { Bench, BenchContext } from '../lib/context.js';
import type { BenchOutcome } from '../lib/result.js';

interface Summary { n: number; p50: number; p99: number; max: number }

interface PlacementReport {
  nodes: number;
  pools_per_node: number;
  candidates: number;
  decisions: number;
  registry_decisions: number;
  timer_overhead_us: number;
  place_least_loaded_us: Summary;
  place_round_robin_us: Summary;
  registry_then_place_us: Summary;
  registry_pools_us: Summary;
  proposed_per_model_index_place_us: Summary;
  [k: string]: unknown;
}

/** Runs orchestratord's own placement benchmark (it imports placement.ts; bench/ may not). */
async function runPlacementProcess(ctx: BenchContext): Promise<PlacementReport> {
  const args = [...(ctx.cpuProf ? ['--cpu-prof', `--cpu-prof-dir=${ctx.dir}`] : []), ctx.paths.placementBench];
  const env = { PATH: process.env.PATH ?? '', ...(ctx.quick ? { PLACEMENT_DECISIONS: '3000', PLACEMENT_REGISTRY_DECISIONS: '300', PLACEMENT_WARMUP: '500' } : {}) };
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (c: Buffer) => { out += c.toString('utf8'); });
    child.stderr.on('data', (c: Buffer) => { err += c.toString('utf8'); });
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
        `apps/orchestratord/src/bench/placement-bench.ts (spawned from its dist) calls orchestratord's own place() over a ` +
        `seeded registry of ${r.nodes} nodes × ${r.pools_per_node} pools with random load (1–16 slots, random free slots, ` +
        '90 % ready, some starting/draining/failed, 16 models, 30 % deterministic, ctx 2k–8k) for random tasks (random ' +
        'model and ctx, 20 % strict, 10 % prefer, 10 % pin). Each decision is timed alone with process.hrtime.bigint() ' +
        `(timer overhead ${r.timer_overhead_us} µs); between decisions, untimed, 4 random pools get new random load. ` +
        `${r.decisions.toLocaleString('en-US')} decisions after a warm-up. The JSON also has round-robin and a variant that ` +
        `includes NodeRegistry.pools() (the views the dispatcher takes per pump) over ${r.registry_decisions.toLocaleString('en-US')} decisions.`,
      samples: { decisions: r.decisions },
      figures: {
        decision_p50: { label: 'place() decision, p50 (least-loaded)', value: r.place_least_loaded_us.p50, unit: 'µs' },
        decision_p99: { label: 'place() decision, p99 (least-loaded)', value: r.place_least_loaded_us.p99, unit: 'µs' },
        registry_decision_p99: { label: 'registry.pools() + place(), p99', value: r.registry_then_place_us.p99, unit: 'µs' },
        indexed_decision_p99: { label: 'place() over the model\'s pools only (proposed per-model index), p99', value: r.proposed_per_model_index_place_us.p99, unit: 'µs' },
      },
      details: { report: r },
    };
  },
};
