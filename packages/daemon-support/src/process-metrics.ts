import { collectDefaultMetrics, Registry } from 'prom-client';

// One per process, on purpose: each collection starts an event-loop delay monitor and a GC observer
// that are never stopped, so collecting per app registry would pile them up (tests build many apps).
let processMetrics: Registry | undefined;

/**
 * The event-loop delay monitor's sampling period, ms. prom-client's default, 10 ms, woke an idle
 * daemon 100 times a second: 3.4 ms of CPU a second on the test VMs, against 0.1 ms for an idle Node
 * process (measured). At 50 ms a stall shorter than the period is seen in proportion to its length,
 * which the `nodejs_eventloop_lag_*` percentiles, read over minutes, absorb.
 */
export const EVENT_LOOP_SAMPLE_MS = 50;

/**
 * prom-client's gauges named `_total`, which Prometheus reserves for counters (`promtool check
 * metrics` flags them). Each repeats the sum of its by-type gauge (`nodejs_active_handles{type}`
 * etc.), so they are not exported: `sum(nodejs_active_handles)` is the same number (CHANGELOG.md).
 */
export const DROPPED_STANDARD_GAUGES: readonly string[] = Object.freeze([
  'nodejs_active_handles_total',
  'nodejs_active_requests_total',
  'nodejs_active_resources_total',
]);

/**
 * The standard process and Node.js runtime series (prom-client's default metrics: `process_*`,
 * `nodejs_*`, under their conventional names, which dashboards and alerts for any Node service
 * expect; less the three gauges misnamed `_total`, {@link DROPPED_STANDARD_GAUGES}) in `registry`:
 * collected once per process, the same metric objects registered in every app registry of it.
 */
export function registerProcessMetrics(registry: Registry): void {
  if (processMetrics === undefined) {
    processMetrics = new Registry();
    collectDefaultMetrics({ register: processMetrics, eventLoopMonitoringPrecision: EVENT_LOOP_SAMPLE_MS });
    for (const name of DROPPED_STANDARD_GAUGES) processMetrics.removeSingleMetric(name);
  }
  for (const { name } of processMetrics.getMetricsAsArray()) {
    const metric = processMetrics.getSingleMetric(name);
    if (metric !== undefined && registry.getSingleMetric(name) === undefined) registry.registerMetric(metric);
  }
}
