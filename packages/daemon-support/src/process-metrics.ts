import { collectDefaultMetrics, Registry } from 'prom-client';

// One per process, on purpose: each collection starts an event-loop delay monitor and a GC observer
// that are never stopped, so collecting per app registry would pile them up (tests build many apps).
let processMetrics: Registry | undefined;

/**
 * The standard process and Node.js runtime series (prom-client's default metrics: `process_*`,
 * `nodejs_*`, under their conventional names, which dashboards and alerts for any Node service
 * expect) in `registry`: collected once per process, the same metric objects registered in every
 * app registry of the process.
 */
export function registerProcessMetrics(registry: Registry): void {
  if (processMetrics === undefined) {
    processMetrics = new Registry();
    collectDefaultMetrics({ register: processMetrics });
  }
  for (const { name } of processMetrics.getMetricsAsArray()) {
    const metric = processMetrics.getSingleMetric(name);
    if (metric !== undefined && registry.getSingleMetric(name) === undefined) registry.registerMetric(metric);
  }
}
