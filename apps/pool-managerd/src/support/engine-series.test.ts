import { readFileSync } from 'node:fs';
import { Counter, Gauge, Histogram, Registry, Summary } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { metricNamingProblems, parsePrometheusText } from '@llama-orch/daemon-support';
import { engineMetricName, EngineSeries } from './engine-series.js';

/** A real llama-server scrape (daemon-support's fixture). */
const LLAMA_SERVER = readFileSync(
  new URL('../../../../packages/daemon-support/src/fixtures/llama-server-metrics.txt', import.meta.url),
  'utf8',
);
const RULES = { requiredLabels: { prefix: 'llorch_engine_', labels: ['pool_id', 'replica_id'] } };

describe('engineMetricName', () => {
  it('translates llama-server names into ours: prefix, valid characters, _total only on counters, rates named as rates', () => {
    expect(engineMetricName('llamacpp:prompt_tokens_total', 'counter')).toEqual({
      name: 'llorch_engine_prompt_tokens_total',
      type: 'counter',
    });
    expect(engineMetricName('llamacpp:kv_cache_usage_ratio', 'gauge')).toEqual({
      name: 'llorch_engine_kv_cache_usage_ratio',
      type: 'gauge',
    });
    expect(engineMetricName('llamacpp:requests_deferred', 'gauge')).toEqual({
      name: 'llorch_engine_requests_deferred',
      type: 'gauge',
    });
    expect(engineMetricName('llamacpp:predicted_tokens_seconds', 'gauge')).toEqual({
      name: 'llorch_engine_predicted_tokens_per_second',
      type: 'gauge',
    });
    expect(engineMetricName('llamacpp:n_tokens_max', 'counter')).toEqual({
      name: 'llorch_engine_n_tokens_max',
      type: 'gauge',
    });
    expect(engineMetricName('llamacpp:new_thing', 'counter')).toEqual({
      name: 'llorch_engine_new_thing_total',
      type: 'counter',
    });
    expect(engineMetricName('llamacpp:odd_total', 'gauge')).toEqual({ name: 'llorch_engine_odd', type: 'gauge' });
    expect(engineMetricName('llamacpp:x_total', 'untyped')).toEqual({ name: 'llorch_engine_x_total', type: 'counter' });
    expect(engineMetricName('llamacpp:y', 'untyped')).toEqual({ name: 'llorch_engine_y', type: 'gauge' });
    expect(engineMetricName('plain:with:colons', 'gauge')).toEqual({
      name: 'llorch_engine_with_colons',
      type: 'gauge',
    });
  });
});

describe('EngineSeries', () => {
  it('exports each engine scrape as llorch_engine_* with pool_id and replica_id, conforming to the naming rules', async () => {
    const registry = new Registry();
    const series = new EngineSeries(registry);
    series.set('p0', 'r0', parsePrometheusText(LLAMA_SERVER).families);
    series.set(
      'p1',
      'r0',
      parsePrometheusText(
        LLAMA_SERVER.replace('llamacpp:tokens_predicted_total 8', 'llamacpp:tokens_predicted_total 30'),
      ).families,
    );
    const text = await registry.metrics();
    const { families, skipped } = parsePrometheusText(text);
    expect(skipped).toBe(0);
    expect(metricNamingProblems(families, RULES)).toEqual([]);
    expect(families.map((f) => f.name)).toEqual(
      expect.arrayContaining([
        'llorch_engine_prompt_tokens_total',
        'llorch_engine_tokens_predicted_total',
        'llorch_engine_requests_processing',
        'llorch_engine_requests_deferred',
        'llorch_engine_predicted_tokens_per_second',
        'llorch_engine_n_tokens_max',
      ]),
    );
    expect(families.find((f) => f.name === 'llorch_engine_tokens_predicted_total')).toEqual({
      name: 'llorch_engine_tokens_predicted_total',
      type: 'counter',
      help: 'Number of generation tokens processed (engine metric llamacpp:tokens_predicted_total)',
      samples: [
        { name: 'llorch_engine_tokens_predicted_total', labels: { pool_id: 'p0', replica_id: 'r0' }, value: 8 },
        { name: 'llorch_engine_tokens_predicted_total', labels: { pool_id: 'p1', replica_id: 'r0' }, value: 30 },
      ],
    });
    expect(families.find((f) => f.name === 'llorch_engine_n_tokens_max')?.type).toBe('gauge');
  });

  it('a dropped engine leaves no series; a family no engine reports leaves /metrics', async () => {
    const registry = new Registry();
    new Gauge({ name: 'llorch_other', help: 'stays', registers: [registry] });
    const series = new EngineSeries(registry);
    series.set(
      'p0',
      'r0',
      parsePrometheusText('# HELP llamacpp:a A.\n# TYPE llamacpp:a gauge\nllamacpp:a 1\n').families,
    );
    series.set(
      'p1',
      'r0',
      parsePrometheusText('# HELP llamacpp:b B.\n# TYPE llamacpp:b gauge\nllamacpp:b 2\n').families,
    );
    expect(
      registry
        .getMetricsAsArray()
        .map((m) => m.name)
        .sort(),
    ).toEqual(['llorch_engine_a', 'llorch_engine_b', 'llorch_other']);
    series.drop('p0');
    expect(series.pools()).toEqual(['p1']);
    const text = await registry.metrics();
    expect(text).not.toContain('llorch_engine_a');
    expect(text).toContain('llorch_engine_b{pool_id="p1",replica_id="r0"} 2');
    // A new replica of the same pool replaces the old one's series.
    series.set('p1', 'r1', parsePrometheusText('# TYPE llamacpp:b gauge\nllamacpp:b 3\n').families);
    expect(await registry.metrics()).toContain('llorch_engine_b{pool_id="p1",replica_id="r1"} 3');
    expect(await registry.metrics()).not.toContain('replica_id="r0"');
    series.drop('p1');
    expect(registry.getMetricsAsArray().map((m) => m.name)).toEqual(['llorch_other']);
  });

  it('keeps engine labels (renaming ours), histogram samples keep their suffixes', async () => {
    const registry = new Registry();
    const series = new EngineSeries(registry);
    series.set(
      'p0',
      'r0',
      parsePrometheusText(
        [
          '# TYPE llamacpp:spec_decode_num_accepted_tokens_per_pos_total counter',
          'llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="1",pool_id="theirs"} 4',
          '# TYPE llamacpp:step_seconds histogram',
          'llamacpp:step_seconds_bucket{le="0.1"} 1',
          'llamacpp:step_seconds_bucket{le="+Inf"} 2',
          'llamacpp:step_seconds_sum 0.3',
          'llamacpp:step_seconds_count 2',
        ].join('\n'),
      ).families,
    );
    const { families } = parsePrometheusText(await registry.metrics());
    expect(metricNamingProblems(families.slice(1), RULES)).toEqual([]);
    expect(families[0]?.samples[0]?.labels).toEqual({
      position: '1',
      exported_pool_id: 'theirs',
      pool_id: 'p0',
      replica_id: 'r0',
    });
    expect(families[1]).toMatchObject({ name: 'llorch_engine_step_seconds', type: 'histogram' });
    expect(families[1]?.samples.map((s) => s.name)).toEqual([
      'llorch_engine_step_seconds_bucket',
      'llorch_engine_step_seconds_bucket',
      'llorch_engine_step_seconds_sum',
      'llorch_engine_step_seconds_count',
    ]);
  });
});

describe('parsePrometheusText over prom-client output', () => {
  it('reads what prom-client writes (every metric type, escapes)', async () => {
    const registry = new Registry();
    const c = new Counter({ name: 'c_total', help: 'c', labelNames: ['k'], registers: [registry] });
    new Gauge({ name: 'g', help: 'g\nnewline \\ backslash', registers: [registry] }).set(2.5);
    new Histogram({ name: 'h_seconds', help: 'h', buckets: [0.1, 1], registers: [registry] }).observe(0.5);
    new Summary({ name: 's_bytes', help: 's', percentiles: [0.5], registers: [registry] }).observe(10);
    c.inc({ k: 'a"b' }, 3);
    const { families, skipped } = parsePrometheusText(await registry.metrics());
    expect(skipped).toBe(0);
    expect(families.map((f) => `${f.name}:${f.type}:${f.samples.length}`)).toEqual([
      'c_total:counter:1',
      'g:gauge:1',
      'h_seconds:histogram:5',
      's_bytes:summary:3',
    ]);
    expect(families[0]?.samples[0]?.labels).toEqual({ k: 'a"b' });
    expect(families[1]?.help).toBe('g\nnewline \\ backslash');
  });
});
