import { readdir, readFile, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { BenchResult, FigureRow } from './result.js';

export const START_MARKER = '<!-- bench:start -->';
export const END_MARKER = '<!-- bench:end -->';

function fmt(value: number, unit: string): string {
  if (!Number.isFinite(value)) return 'n/a';
  const abs = Math.abs(value);
  const digits = abs >= 1000 ? 0 : abs >= 100 ? 1 : abs >= 10 ? 2 : 3;
  const text = value.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: 0 });
  return unit === '' || unit === '×' ? `${text}${unit}` : `${text} ${unit}`;
}

function targetText(row: FigureRow): string {
  if (row.target === undefined) return '—';
  return `${row.target.op === '<=' ? '≤' : '≥'} ${fmt(row.target.value, row.target.unit)}`;
}

function metText(row: FigureRow): string {
  if (row.met === undefined) return '';
  return row.met ? 'yes' : '**no**';
}

/** Loads every `bench/results/*.json` in the order the runner defines. */
export async function loadResults(dir: string, order: readonly string[]): Promise<BenchResult[]> {
  let files: string[];
  try {
    files = (await readdir(dir)).filter((f) => f.endsWith('.json'));
  } catch {
    return [];
  }
  const results: BenchResult[] = [];
  for (const f of files) {
    try {
      results.push(JSON.parse(await readFile(join(dir, f), 'utf8')) as BenchResult);
    } catch {
      // a foreign or half-written file is not a result
    }
  }
  const rank = (n: string): number => {
    const i = order.indexOf(n);
    return i < 0 ? order.length : i;
  };
  return results.sort((a, b) => rank(a.name) - rank(b.name));
}

/** The Markdown placed between the markers. */
export function renderSection(results: readonly BenchResult[]): string {
  const lines: string[] = [];
  lines.push('');
  lines.push('Measured by `pnpm bench` (all) or `pnpm bench <name>` (one) after `pnpm build`; each run writes');
  lines.push('`bench/results/<name>.json` (method, samples, distributions, machine) and regenerates this table.');
  lines.push('Every figure is a difference or a ratio taken within one run with the variants interleaved');
  lines.push('(A B A B …), or an absolute figure against an absolute target; latencies are medians (p50) and p99');
  lines.push('over the stated samples. The machine is shared and noisy: read the load average next to each row; a run');
  lines.push(
    'under `nice -n -10 pnpm bench` (as noted there) keeps other work from preempting the benchmark processes.',
  );
  lines.push('');
  lines.push('| Benchmark | Figure | Result | Target | Met | Samples | Machine (cores, load at start) | Reproduce |');
  lines.push('|---|---|---|---|---|---|---|---|');
  for (const r of results) {
    const samples = Object.entries(r.samples)
      .map(([k, v]) => `${v.toLocaleString('en-US')} ${k}`)
      .join(', ');
    const niceText = r.nice !== undefined && r.nice !== 0 ? `, nice ${r.nice}` : '';
    const machine = `${r.cores} cores, load ${r.load_avg_at_start[0] ?? '?'}${niceText}; ${r.date.slice(0, 10)}`;
    r.rows.forEach((row, i) => {
      lines.push(
        `| ${i === 0 ? r.title : ''} | ${row.label} | ${row.notMeasured === undefined ? fmt(row.value, row.unit) : `not measured: ${row.notMeasured}`} | ${targetText(row)} | ${metText(row)} | ${i === 0 ? samples : ''} | ${i === 0 ? machine : ''} | ${i === 0 ? `\`pnpm bench ${r.name}\`` : ''} |`,
      );
    });
  }
  lines.push('');
  lines.push('How each row is measured:');
  lines.push('');
  for (const r of results) {
    lines.push(`- **${r.title}** (\`${r.name}\`): ${r.method}`);
    for (const n of r.notes) lines.push(`  - ${n}`);
  }
  lines.push('');
  return lines.join('\n');
}

/** Rewrites only the text between the markers; appends a Performance section when they are absent. */
export async function updateReadme(readmePath: string, section: string): Promise<void> {
  const text = await readFile(readmePath, 'utf8');
  const start = text.indexOf(START_MARKER);
  const end = text.indexOf(END_MARKER);
  let next: string;
  if (start >= 0 && end > start) {
    next = `${text.slice(0, start + START_MARKER.length)}\n${section}\n${text.slice(end)}`;
  } else {
    next = `${text.replace(/\s*$/, '')}\n\n## Performance\n\n${START_MARKER}\n${section}\n${END_MARKER}\n`;
  }
  const tmp = `${readmePath}.${process.pid}.tmp`;
  await writeFile(tmp, next);
  await rename(tmp, readmePath);
}
