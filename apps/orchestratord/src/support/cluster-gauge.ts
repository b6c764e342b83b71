import { Gauge, type GaugeConfiguration, type MetricObjectWithValues, type MetricValue } from 'prom-client';

/**
 * A gauge of cluster state (the same value on every replica: nodes online, pools available, the
 * shared queue) that only the metrics leader exports. On the other replicas its family has no
 * samples, so `sum()` over every replica's scrape is the true value, not N times it
 * (.specs/60-orchestratord.md, Metrics).
 */
export class ClusterGauge<T extends string = string> extends Gauge<T> {
  readonly #exports: () => boolean;

  constructor(config: GaugeConfiguration<T> & { exports: () => boolean }) {
    const { exports, ...gauge } = config;
    super(gauge);
    this.#exports = exports;
  }

  override async get(): Promise<MetricObjectWithValues<MetricValue<T>>> {
    const exported = this.#exports();
    const family = await super.get();
    return exported ? family : { ...family, values: [] };
  }
}
