// `@llama-orch/daemon-support/tracing`: its own entry, so what imports the package's main entry
// without tracing never loads @opentelemetry/api. The SDK itself is loaded only when tracing is on.
export { startTracing, disabledTracing } from './start-tracing.js';
export type { Tracing, StartTracingOptions } from './tracing.js';
export { tracingSettings, TracingConfigError, TRACES_SAMPLERS, DEFAULT_OTLP_ENDPOINT } from './tracing-settings.js';
export type { TracingSettings, OtlpProtocol, TracesSampler } from './tracing-settings.js';
export { extractContext, injectTraceparent, traceFields } from './propagation.js';
export type { IncomingHeaders, TraceFields } from './propagation.js';
