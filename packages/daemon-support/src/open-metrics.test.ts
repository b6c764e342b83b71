import { Counter, Histogram, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { acceptsOpenMetrics, openMetricsText } from './open-metrics.js';

describe('openMetricsText', () => {
  it('writes OpenMetrics with exemplars and leaves the registry answering Prometheus text as before', async () => {
    const registry = new Registry();
    const counter = new Counter({ name: 'x_requests_total', help: 'Requests.', registers: [registry] });
    const hist = new Histogram({
      name: 'x_ttft_seconds',
      help: 'TTFT.',
      labelNames: ['pool'] as const,
      buckets: [0.1, 1],
      enableExemplars: true,
      registers: [],
    });
    registry.registerMetric(hist);
    counter.inc(3);
    hist.observe({
      labels: { pool: 'p' },
      value: 0.05,
      exemplarLabels: { trace_id: 'abc123' } as Record<string, string>,
    });
    hist.observe({ labels: { pool: 'p' }, value: 0.5 });
    const before = await registry.metrics();

    const om = await openMetricsText(registry);
    expect(om).toContain('# TYPE x_requests counter');
    expect(om).toContain('x_requests_total 3');
    expect(om).toMatch(/x_ttft_seconds_bucket\{le="0\.1",pool="p"\} 1 # \{trace_id="abc123"\} 0\.05 \d/);
    expect(om.endsWith('# EOF\n')).toBe(true);
    // the Prometheus answer is untouched (no exemplar, the counter keeps its _total name)
    expect(await registry.metrics()).toBe(before);
    expect(before).toContain('x_requests_total 3');
    expect(before).not.toContain('trace_id');
  });

  it('is asked for by the Accept header', () => {
    expect(acceptsOpenMetrics('application/openmetrics-text; version=1.0.0,text/plain;q=0.5')).toBe(true);
    expect(acceptsOpenMetrics('text/plain')).toBe(false);
    expect(acceptsOpenMetrics(undefined)).toBe(false);
  });
});
