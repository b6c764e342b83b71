import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { END_MARKER, START_MARKER, renderSection, updateReadme } from './readme.js';
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
    expect(renderSection([r])).toContain(
      '| Failover | clients resumed | not measured: not on this build | ≤ 2 intervals |  |',
    );
  });

  it('renders one row per figure with its target and reproduce command', () => {
    const md = renderSection([result]);
    expect(md).toContain('| Relay overhead | added TTFT p50 | 0.5 ms | ≤ 1 ms | yes |');
    expect(md).toContain('| tokens/s ratio | 0.9× | ≥ 0.99× | **no** |');
    expect(md).toContain('`pnpm bench relay`');
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
