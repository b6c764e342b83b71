import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { END_MARKER, START_MARKER, renderPerformancePage, renderSection, updateReadme } from './readme.js';
import { buildResult } from './result.js';

const result = buildResult({
  name: 'relay',
  title: 'Relay overhead',
  targets: [
    { figure: 'ttft', op: '<=', value: 1, unit: 'ms' },
    { figure: 'ratio', op: '>=', value: 0.99, unit: '×' },
  ],
  outcome: {
    method: 'interleaved pairs',
    samples: { pairs: 10 },
    figures: {
      ttft: { label: 'added TTFT p50', value: 0.5, unit: 'ms' },
      ratio: { label: 'tokens/s ratio', value: 0.9, unit: '×' },
    },
    details: {},
  },
  startedAt: performance.now(),
  loadAtStart: [0.5, 0.4, 0.3],
});

describe('results and the README table', () => {
  it('judges every target and the whole result', () => {
    expect(result.rows.map((r) => r.met)).toEqual([true, false]);
    expect(result.met).toBe(false);
    expect(result.cores).toBeGreaterThan(0);
  });

  it('a target whose figure is missing counts as missed', () => {
    const r = buildResult({
      ...{ name: 'x', title: 'X', startedAt: 0, loadAtStart: [] },
      targets: [{ figure: 'gone', op: '<=', value: 1, unit: 'ms' }],
      outcome: { method: '', samples: {}, figures: {}, details: {} },
    });
    expect(r.met).toBe(false);
  });

  it('a figure not measured shows its reason, and its target is neither met nor missed', () => {
    const r = buildResult({
      ...{ name: 'failover', title: 'Failover', startedAt: 0, loadAtStart: [] },
      targets: [{ figure: 'resumed', op: '<=', value: 2, unit: 'intervals' }],
      outcome: {
        method: '',
        samples: {},
        figures: {
          resumed: { label: 'clients resumed', value: Number.NaN, unit: 'intervals', notMeasured: 'not on this build' },
        },
        details: {},
      },
    });
    expect(r.rows[0]?.met).toBeUndefined();
    expect(renderPerformancePage([r])).toContain(
      '| Failover | clients resumed | not measured: not on this build | ≤ 2 intervals |  |',
    );
    expect(renderSection([r])).toContain(
      '| `failover` | clients resumed | not measured: not on this build | ≤ 2 intervals |  |',
    );
  });

  it('the performance page: one row per figure with its target, samples, machine and reproduce command, then the methods', () => {
    const md = renderPerformancePage([result]);
    expect(md).toContain('| Relay overhead | added TTFT p50 | 0.5 ms | ≤ 1 ms | yes | 10 pairs |');
    expect(md).toContain('| tokens/s ratio | 0.9× | ≥ 0.99× | **no** |');
    expect(md).toContain('`pnpm bench relay`');
    expect(md).toContain('- **Relay overhead** (`relay`): interleaved pairs');
  });

  it('the README table: only the figures with a target, and a link to the page with the rest', () => {
    const withUntargeted = buildResult({
      ...{ name: 'relay', title: 'Relay overhead', startedAt: 0, loadAtStart: [] },
      targets: [{ figure: 'ttft', op: '<=', value: 1, unit: 'ms' }],
      outcome: {
        method: '',
        samples: {},
        figures: {
          ttft: { label: 'added TTFT p50', value: 0.5, unit: 'ms' },
          cpu: { label: 'CPU per token', value: 80, unit: 'µs' },
        },
        details: {},
      },
    });
    const md = renderSection([withUntargeted]);
    expect(md).toContain('| `relay` | added TTFT p50 | 0.5 ms | ≤ 1 ms | yes |');
    expect(md).not.toContain('CPU per token');
    expect(md).toContain('(docs/performance.md)');
  });

  it('rewrites only between the markers, and appends the section once when they are absent', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'bench-readme-'));
    const file = join(dir, 'README.md');
    await writeFile(file, '# Title\n\nIntro.\n');
    await updateReadme(file, 'first');
    await updateReadme(file, 'second');
    const text = await readFile(file, 'utf8');
    expect(text.startsWith('# Title\n\nIntro.\n\n## Performance\n')).toBe(true);
    expect(text.split(START_MARKER)).toHaveLength(2);
    expect(text).toContain(`${START_MARKER}\nsecond\n${END_MARKER}`);
    expect(text).not.toContain('first');
  });
});
