import {
  Registry,
  type Metric,
  type MetricObjectWithValues,
  type MetricValue,
  type OpenMetricsContentType,
} from 'prom-client';

/** What a prom-client metric answers when asked for its samples (histograms keep their bucket labels for text). */
interface Samples {
  get(): Promise<MetricObjectWithValues<MetricValue<string>>>;
  getForPromString?(): Promise<MetricObjectWithValues<MetricValue<string>>>;
}

/** The content type of {@link openMetricsText}'s answer. */
export const OPENMETRICS_CONTENT_TYPE = Registry.OPENMETRICS_CONTENT_TYPE;

/** Whether a scraper's `Accept` header asks for OpenMetrics (Prometheus does when it wants exemplars). */
export function acceptsOpenMetrics(accept: string | undefined): boolean {
  return accept !== undefined && accept.includes('application/openmetrics-text');
}

/**
 * `registry`'s metrics in the OpenMetrics text format, exemplars included — the registry itself
 * stays in the Prometheus format for every other scrape. prom-client writes one format per
 * registry, and its OpenMetrics pass renames counters on the metric objects themselves (it strips
 * `_total` to add it back per sample), which would break the Prometheus answers after it; so each
 * metric is registered in a registry of the other format through a view of its own whose name may
 * change freely. A histogram with exemplars is made with `registers: []` and then registered
 * (`registry.registerMetric`): prom-client refuses exemplars at construction in a registry of the
 * Prometheus format, although that format simply leaves them out.
 */
export function openMetricsText(registry: Registry): Promise<string> {
  const om = new Registry<OpenMetricsContentType>();
  om.setContentType(Registry.OPENMETRICS_CONTENT_TYPE);
  for (const m of registry.getMetricsAsArray()) {
    const source = m as unknown as Samples;
    const view = {
      name: m.name,
      help: m.help,
      type: m.type,
      get: async () => ({ ...(await (source.getForPromString ?? source.get).call(m)), name: view.name }),
    };
    om.registerMetric(view as unknown as Metric);
  }
  return om.metrics();
}
