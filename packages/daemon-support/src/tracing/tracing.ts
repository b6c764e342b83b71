import type { Tracer } from '@opentelemetry/api';
import type { Log } from '../log.js';

// The types of a daemon's tracing, apart from start-tracing.ts and sdk.ts, which both use them.

/**
 * A daemon's tracing: made once by its main (`startTracing`), handed to what makes spans,
 * closed last on shutdown.
 */
export interface Tracing {
  /**
   * Whether spans are recorded and exported. Code on a hot path checks this and skips span work
   * entirely when false (no span objects, no context, no extra log bindings).
   */
  readonly enabled: boolean;
  /** Makes the spans: the SDK's tracer when enabled, a no-op tracer (non-recording spans) when not. */
  readonly tracer: Tracer;
  /**
   * Exports what the batch processor still holds and stops the exporter, within `closeTimeoutMs`
   * (spans not sent by then are dropped, with a warning: a collector that is down never holds a
   * shutdown). Never rejects; idempotent (a second call returns the same promise). Spans started
   * after it are dropped.
   */
  close(): Promise<void>;
}

export interface StartTracingOptions {
  /** `service.name` of the daemon's spans (`orchestratord`, `pool-managerd`) unless `OTEL_SERVICE_NAME` or a `service.name` in `OTEL_RESOURCE_ATTRIBUTES` names another. */
  serviceName: string;
  /** `service.version` (the daemon's package version). */
  serviceVersion?: string;
  /**
   * The process environment: decides whether tracing runs and how it exports (see
   * `tracingSettings`). The SDK reads the rest of the standard variables (endpoint, headers,
   * timeout, compression, sampler, batch sizes, resource attributes) from `process.env` itself, so
   * a daemon passes `process.env` and a test stubs `process.env` rather than pass another object.
   */
  env: Readonly<Record<string, string | undefined>>;
  /** The `tracing on` line, and the SDK's own warnings (failed exports) under `component: 'tracing'`. */
  logger: Log;
  /** Longest wait for the last spans on {@link Tracing.close}, ms. @default 5000 */
  closeTimeoutMs?: number;
}
