import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { buildResult, MAX_KEPT_ARRAY, trimDetail, trimResult, writeResult } from './result.js';

const samples = (n: number): number[] => Array.from({ length: n }, (_, i) => n - i);

describe('trimDetail', () => {
  it('replaces an array of more than 32 numbers by its summary', () => {
    expect(trimDetail(samples(200))).toEqual({ n: 200, min: 1, p50: 100, p90: 180, p99: 198, max: 200, mean: 100.5 });
  });

  it('keeps arrays of up to 32 entries, numbers or not', () => {
    expect(trimDetail(samples(MAX_KEPT_ARRAY))).toEqual(samples(MAX_KEPT_ARRAY));
    const rounds = Array.from({ length: MAX_KEPT_ARRAY }, (_, i) => ({ round: i }));
    expect(trimDetail(rounds)).toEqual(rounds);
  });

  it('keeps the first 32 of a longer array of objects and counts the rest', () => {
    const turns = Array.from({ length: 40 }, (_, i) => ({ turn: i, ttft_ms: i * 2 }));
    expect(trimDetail({ turns })).toEqual({ turns: { n: 40, first: turns.slice(0, 32), truncated: 8 } });
  });

  it('trims inside kept objects and arrays, and inside the entries it keeps', () => {
    const deep = { a: [{ gaps: samples(50) }], b: { c: 'x', d: [1, 2] } };
    expect(trimDetail(deep)).toEqual({
      a: [{ gaps: { n: 50, min: 1, p50: 25, p90: 45, p99: 50, max: 50, mean: 25.5 } }],
      b: { c: 'x', d: [1, 2] },
    });
  });

  it('counts NaN and Infinity (null once through JSON) outside the summary', () => {
    const xs: (number | null)[] = [...samples(40), null, null];
    expect(trimDetail(xs)).toMatchObject({ n: 40, min: 1, max: 40, non_finite: 2 });
  });

  it('rounds the summary to 6 significant digits', () => {
    const xs = Array.from({ length: 33 }, () => 1 / 3);
    expect(trimDetail(xs)).toMatchObject({ p50: 0.333333, mean: 0.333333 });
  });
});

describe('trimResult and writeResult', () => {
  const result = buildResult({
    name: 'trim-check',
    title: 'Trim check',
    targets: [{ figure: 'lat_p99_ms', op: '<=', value: 5, unit: 'ms' }],
    outcome: {
      method: 'm',
      samples: { rounds: 100 },
      figures: { lat_p99_ms: { label: 'p99', value: 4.2, unit: 'ms' } },
      details: { latencies_ms: samples(100), per_round: Array.from({ length: 100 }, (_, i) => ({ i })), cpu: [1, 2] },
    },
    startedAt: performance.now(),
    loadAtStart: [0, 0, 0],
  });

  it('keeps rows, figures, samples and targets, and trims the details', () => {
    const t = trimResult(result);
    expect(t.rows).toEqual(result.rows);
    expect(t.results.figures).toBe(result.results.figures);
    expect(t.samples).toEqual({ rounds: 100 });
    expect(t.targets).toEqual(result.targets);
    expect(Object.keys(t.results)).toEqual(['figures', 'latencies_ms', 'per_round', 'cpu']);
    expect(t.results.latencies_ms).toMatchObject({ n: 100, p99: 99 });
    expect(t.results.per_round).toMatchObject({ n: 100, truncated: 68 });
    expect(t.results.cpu).toEqual([1, 2]);
    // The outcome itself is not changed.
    expect(result.results.latencies_ms).toHaveLength(100);
  });

  it('writes the trimmed result', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'bench-result-'));
    try {
      const file = await writeResult(dir, result);
      const written = JSON.parse(await readFile(file, 'utf8')) as typeof result;
      expect(written.results.latencies_ms).toMatchObject({ n: 100 });
      expect(written.rows).toEqual(JSON.parse(JSON.stringify(result.rows)));
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
