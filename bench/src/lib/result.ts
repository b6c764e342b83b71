import { availableParallelism, cpus, getPriority, loadavg, totalmem } from 'node:os';
import { mkdir, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';

/** A target as the issue states it; never relaxed in code. */
export interface Target {
  /** Key of the figure in `figures`. */
  readonly figure: string;
  readonly op: '<=' | '>=';
  readonly value: number;
  readonly unit: string;
}

/** One reported figure (a row of the README table). */
export interface Figure {
  readonly label: string;
  readonly value: number;
  readonly unit: string;
  /** Why there is no value (the README shows `not measured: <reason>`, and the target is neither met nor missed). */
  readonly notMeasured?: string;
}

export interface FigureRow extends Figure {
  readonly key: string;
  readonly target?: Target | undefined;
  readonly met?: boolean | undefined;
}

/** What a benchmark returns to the runner. */
export interface BenchOutcome {
  /** How it was measured, in a few sentences (goes to the JSON and the README notes). */
  method: string;
  /** Sample counts (e.g. `{ pairs: 200, gaps: 25000 }`). */
  samples: Record<string, number>;
  /** Headline figures by key. */
  figures: Record<string, Figure>;
  /** Everything else worth keeping (distributions, per-variant summaries, environment). */
  details: Record<string, unknown>;
  /** Things a reader must know (a figure measured another way, a known product limit). */
  notes?: string[];
}

export interface BenchResult {
  name: string;
  title: string;
  date: string;
  cores: number;
  cpu_model: string;
  ram_bytes: number;
  node: string;
  /** 1/5/15-minute load average when the benchmark started: the machine is shared. */
  load_avg_at_start: number[];
  /** Scheduling priority the run had (`nice -n -10 pnpm bench` keeps other work on a shared machine from preempting it). */
  nice: number;
  reproduce: string;
  duration_s: number;
  method: string;
  samples: Record<string, number>;
  rows: FigureRow[];
  results: Record<string, unknown>;
  targets: Target[];
  notes: string[];
  met: boolean;
}

export function isMet(t: Target, value: number): boolean {
  if (!Number.isFinite(value)) return false;
  return t.op === '<=' ? value <= t.value : value >= t.value;
}

export function buildResult(args: {
  name: string;
  title: string;
  targets: readonly Target[];
  outcome: BenchOutcome;
  startedAt: number;
  loadAtStart: number[];
}): BenchResult {
  const { outcome, targets } = args;
  const rows: FigureRow[] = Object.entries(outcome.figures).map(([key, f]) => {
    const target = targets.find((t) => t.figure === key);
    return {
      key,
      ...f,
      target,
      met: target === undefined || f.notMeasured !== undefined ? undefined : isMet(target, f.value),
    };
  });
  for (const t of targets) {
    if (outcome.figures[t.figure] === undefined)
      rows.push({ key: t.figure, label: t.figure, value: Number.NaN, unit: t.unit, target: t, met: false });
  }
  return {
    name: args.name,
    title: args.title,
    date: new Date().toISOString(),
    cores: availableParallelism(),
    cpu_model: cpus()[0]?.model ?? 'unknown',
    ram_bytes: totalmem(),
    node: process.version,
    load_avg_at_start: args.loadAtStart.map((l) => Math.round(l * 100) / 100),
    nice: getPriority(),
    reproduce: `pnpm build && pnpm bench ${args.name}`,
    duration_s: Math.round((performance.now() - args.startedAt) / 100) / 10,
    method: outcome.method,
    samples: outcome.samples,
    rows,
    results: { figures: outcome.figures, ...outcome.details },
    targets: [...targets],
    notes: outcome.notes ?? [],
    met: rows.every((r) => r.met !== false),
  };
}

export function currentLoad(): number[] {
  return loadavg();
}

/** Writes `bench/results/<name>.json` atomically. */
export async function writeResult(dir: string, result: BenchResult): Promise<string> {
  await mkdir(dir, { recursive: true });
  const file = join(dir, `${result.name}.json`);
  const tmp = `${file}.${process.pid}.tmp`;
  await writeFile(tmp, `${JSON.stringify(result, null, 2)}\n`);
  await rename(tmp, file);
  return file;
}
