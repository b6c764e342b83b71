import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { metricNamingProblems } from './metric-naming.js';
import { parsePrometheusText, type PromFamily } from './prom-text.js';

describe('parsePrometheusText', () => {
  it('reads llama-server /metrics (captured from a real engine): types, help, colon names', () => {
    const text = readFileSync(new URL('./fixtures/llama-server-metrics.txt', import.meta.url), 'utf8');
    const { families, skipped } = parsePrometheusText(text);
    expect(skipped).toBe(0);
    expect(families).toHaveLength(15);
    const byName = new Map(families.map((f) => [f.name, f]));
    expect(byName.get('llamacpp:tokens_predicted_total')).toEqual({
      name: 'llamacpp:tokens_predicted_total',
      type: 'counter',
      help: 'Number of generation tokens processed',
      samples: [{ name: 'llamacpp:tokens_predicted_total', labels: {}, value: 8 }],
    });
    expect(byName.get('llamacpp:predicted_tokens_seconds')).toMatchObject({
      type: 'gauge',
      samples: [{ value: 922.874 }],
    });
    expect(byName.get('llamacpp:n_tokens_max')?.type).toBe('counter');
  });

  it('groups histogram and summary samples under their family, with labels and special values', () => {
    const text = [
      '# HELP h_seconds A histogram.',
      '# TYPE h_seconds histogram',
      'h_seconds_bucket{le="0.5",pool_id="p"} 1',
      'h_seconds_bucket{le="+Inf",pool_id="p"} 2',
      'h_seconds_sum{pool_id="p"} 1.5',
      'h_seconds_count{pool_id="p"} 2',
      '# TYPE s summary',
      's{quantile="0.5"} NaN',
      's_sum 3',
      's_count 1',
      '# a plain comment',
      'plain_count 7 1712345678000',
      'x{a="q\\"uo\\\\te\\n",b=",}"} -Inf',
    ].join('\n');
    const { families, skipped } = parsePrometheusText(text);
    expect(skipped).toBe(0);
    expect(families.map((f) => [f.name, f.type, f.samples.length])).toEqual([
      ['h_seconds', 'histogram', 4],
      ['s', 'summary', 3],
      ['plain_count', 'untyped', 1],
      ['x', 'untyped', 1],
    ]);
    expect(families[0]?.samples[1]).toEqual({
      name: 'h_seconds_bucket',
      labels: { le: '+Inf', pool_id: 'p' },
      value: 2,
    });
    expect(Number.isNaN(families[1]?.samples[0]?.value)).toBe(true);
    expect(families[3]?.samples[0]).toEqual({ name: 'x', labels: { a: 'q"uo\\te\n', b: ',}' }, value: -Infinity });
  });

  it('skips (and counts) lines it cannot read, keeping the rest', () => {
    const text = [
      'ok 1',
      'bad{a="x" 1',
      'also bad',
      'bad_value abc',
      '# TYPE t nonsense',
      '9starts_with_digit 1',
      'ok2{a="b"} 2',
    ].join('\n');
    const { families, skipped } = parsePrometheusText(text);
    expect(families.map((f) => f.name)).toEqual(['ok', 'ok2']);
    expect(skipped).toBe(5);
  });
});

function fam(
  name: string,
  type: PromFamily['type'],
  labels: Record<string, string>[] = [{}],
  help = 'help',
): PromFamily {
  return { name, type, help, samples: labels.map((l) => ({ name, labels: l, value: 1 })) };
}

describe('metricNamingProblems', () => {
  it('accepts conforming families, the standard process and nodejs ones included', () => {
    expect(
      metricNamingProblems(
        [
          fam('llorch_tasks_started_total', 'counter', [{ pool_id: 'p', priority: 'batch' }]),
          fam('llorch_pool_slots', 'gauge', [{ pool_id: 'p' }]),
          fam('llorch_task_first_token_seconds', 'histogram'),
          fam('process_cpu_seconds_total', 'counter'),
          fam('nodejs_active_handles', 'gauge'),
          fam('nodejs_heap_size_total_bytes', 'gauge'),
          fam('llorch_engine_requests_processing', 'gauge', [{ pool_id: 'p', replica_id: 'r0' }]),
        ],
        { requiredLabels: { prefix: 'llorch_engine_', labels: ['pool_id', 'replica_id'] } },
      ),
    ).toEqual([]);
  });

  it('names every broken rule', () => {
    const problems = metricNamingProblems(
      [
        fam('queue_depth', 'gauge'),
        fam('llorch_pool_slots_total', 'gauge'),
        fam('llorch_tokens', 'counter'),
        fam('llorch_latency_first_token_ms', 'histogram'),
        fam('llorch_tokens_per_task', 'summary'),
        fam('llorch_x_total', 'counter', [{ task_id: 'a' }, { correlation_id: 'b' }, { key_id: 'c' }]),
        fam('llorch_y_total', 'counter', [{ reason: '0b8e4a52-3c11-4d0f-9a4f-8f6a1de0e0c1' }]),
        fam('llamacpp:requests_processing', 'gauge'),
        fam('llorch_engine_requests_deferred', 'gauge', [{ pool_id: 'p' }]),
        fam('llorch_no_help', 'gauge', [{}], ''),
        fam('nodejs_made_up_total', 'gauge'),
      ],
      { requiredLabels: { prefix: 'llorch_engine_', labels: ['pool_id', 'replica_id'] } },
    );
    expect(problems).toEqual([
      'queue_depth: does not start with llorch_',
      'llorch_pool_slots_total: only counters end in _total (this is a gauge)',
      'llorch_tokens: a counter must end in _total',
      'llorch_latency_first_token_ms: a histogram must be in a base unit (_seconds, _bytes)',
      'llorch_latency_first_token_ms: not a base unit (use _seconds or _bytes)',
      'llorch_tokens_per_task: a summary must be in a base unit (_seconds, _bytes)',
      'llorch_x_total: label task_id is unbounded (an id of a task or request)',
      'llorch_x_total: label correlation_id is unbounded (an id of a task or request)',
      'llorch_x_total: label key_id is unbounded (an id of a task or request)',
      'llorch_y_total: label reason="0b8e4a52-3c11-4d0f-9a4f-8f6a1de0e0c1" looks like a generated id',
      'llamacpp:requests_processing: not a valid metric name (colons are for recording rules)',
      'llamacpp:requests_processing: does not start with llorch_',
      'llorch_engine_requests_deferred: sample without replica_id',
      'llorch_no_help: no HELP text',
      'nodejs_made_up_total: only counters end in _total (this is a gauge)',
    ]);
  });
});
