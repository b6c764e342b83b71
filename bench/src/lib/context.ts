import type { BenchPaths } from './repo.js';
import type { BenchOutcome, Target } from './result.js';

/** What every benchmark gets from the runner. */
export interface BenchContext {
  readonly paths: BenchPaths;
  /** Scratch directory of this run (configs, runtime dirs, daemon logs); kept for inspection. */
  readonly dir: string;
  /** Progress line to stderr. */
  log(message: string): void;
  /** Fewer samples (a smoke run of the harness, not a result to report). */
  readonly quick: boolean;
  /** Start the daemons under `node --cpu-prof` (profiles land in `dir`). */
  readonly cpuProf: boolean;
  /** Extra `node` flags for the daemons (e.g. `--trace-gc`), for diagnosis. */
  readonly nodeFlags: readonly string[];
  /** `--name=value` arguments meant for a benchmark (e.g. flood's `--clients=300`), by name without the dashes. */
  readonly options: ReadonlyMap<string, string>;
  readonly signal: AbortSignal;
}

export interface Bench {
  readonly name: string;
  readonly title: string;
  readonly targets: readonly Target[];
  run(ctx: BenchContext): Promise<BenchOutcome>;
}

/** `node --cpu-prof` flags for a daemon when profiling is asked for. */
export function profFlags(ctx: BenchContext, name: string): string[] {
  return [
    ...ctx.nodeFlags,
    ...(ctx.cpuProf ? ['--cpu-prof', `--cpu-prof-dir=${ctx.dir}`, `--cpu-prof-name=${name}.cpuprofile`] : []),
  ];
}
