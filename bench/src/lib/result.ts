import { availableParallelism, cpus, getPriority, loadavg, totalmem } from 'node:os';
import { mkdir, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { summarize, type Summary } from './stats.js';

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

/** Longest array `trimResult` keeps as it is. */
export const MAX_KEPT_ARRAY = 32;

/** What a longer array of numbers becomes: its summary (`non_finite`: samples left out of it). */
export interface TrimmedNumbers extends Summary {
  readonly non_finite?: number;
}

/** What a longer array of anything else becomes: its first `MAX_KEPT_ARRAY` entries. */
export interface TrimmedList {
  readonly n: number;
  readonly first: unknown[];
  readonly truncated: number;
}

/** Numbers only (a `null` is a NaN or Infinity that went through JSON), at least one of them. */
function isNumberArray(value: readonly unknown[]): value is readonly (number | null)[] {
  return value.some((v) => typeof v === 'number') && value.every((v) => typeof v === 'number' || v === null);
}

const sig = (v: number): number => (Number.isFinite(v) ? Number(v.toPrecision(6)) : v);

/**
 * A copy of a JSON value (what `JSON.parse` gives: no class instances) with every array longer than `MAX_KEPT_ARRAY` replaced: an array of
 * numbers by its summary (n, min, p50, p90, p99, max, mean; 6 significant digits), any other by its
 * first entries and a `truncated` count. Shorter arrays and objects are walked, not cut.
 */
export function trimDetail(value: unknown): unknown {
  if (Array.isArray(value)) {
    if (value.length > MAX_KEPT_ARRAY && isNumberArray(value)) {
      const finite = value.filter((v): v is number => typeof v === 'number' && Number.isFinite(v));
      const { n, ...stats } = summarize(finite);
      const out: TrimmedNumbers = {
        n,
        ...(Object.fromEntries(Object.entries(stats).map(([k, v]) => [k, sig(v)])) as Omit<Summary, 'n'>),
        ...(finite.length < value.length ? { non_finite: value.length - finite.length } : {}),
      };
      return out;
    }
    if (value.length > MAX_KEPT_ARRAY) {
      const out: TrimmedList = {
        n: value.length,
        first: value.slice(0, MAX_KEPT_ARRAY).map(trimDetail),
        truncated: value.length - MAX_KEPT_ARRAY,
      };
      return out;
    }
    return value.map(trimDetail);
  }
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, trimDetail(v)]));
  }
  return value;
}

/**
 * The result as written: what a re-run needs to compare (summaries, distributions, machine), not
 * every sample. Only `results` is trimmed, and its `figures` not at all; `rows` (the README and
 * docs/performance.md tables), `samples`, `targets` and `notes` are kept as they are.
 */
export function trimResult(result: BenchResult): BenchResult {
  const { figures, ...details } = result.results;
  // Through JSON first, as the file will be: toJSON() applied, NaN as null, undefined dropped.
  const plain = JSON.parse(JSON.stringify(details)) as Record<string, unknown>;
  return {
    ...result,
    results: { figures, ...(trimDetail(plain) as Record<string, unknown>) },
  };
}

/** Writes `bench/results/<name>.json` atomically, trimmed (`trimResult`). */
export async function writeResult(dir: string, result: BenchResult): Promise<string> {
  await mkdir(dir, { recursive: true });
  const file = join(dir, `${result.name}.json`);
  const tmp = `${file}.${process.pid}.tmp`;
  await writeFile(tmp, `${JSON.stringify(trimResult(result), null, 2)}\n`);
  await rename(tmp, file);
  return file;
}
