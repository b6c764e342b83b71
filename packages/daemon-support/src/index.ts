export { logDestination } from './log-destination.js';
export type { LogDestination, LogDestinationOptions } from './log-destination.js';
export { closeAll, onceClose, CloseTimeoutError } from './close-all.js';
export type { CloseStep, CloseReport, CloseLog } from './close-all.js';
export { parsePrometheusText } from './prom-text.js';
export type { PromFamily, PromSample, PromText, PromType } from './prom-text.js';
export { metricNamingProblems, STANDARD_GAUGES_NAMED_TOTAL } from './metric-naming.js';
export type { MetricNamingRules } from './metric-naming.js';
export { registerProcessMetrics } from './process-metrics.js';
