import { ProxyTracerProvider } from '@opentelemetry/api';
import type { StartTracingOptions, Tracing } from './tracing.js';
import { tracingSettings } from './tracing-settings.js';

export type { StartTracingOptions, Tracing } from './tracing.js';

/**
 * Starts tracing as the standard OTEL_* variables ask (`tracingSettings`): off unless an OTLP
 * endpoint is configured. Off, it loads nothing beyond `@opentelemetry/api`, whose no-op tracer it
 * returns. On, it imports the SDK (`./sdk.js`, loaded only here), exports spans over OTLP/HTTP
 * (protobuf or JSON) through a batch processor, and registers the W3C trace-context propagator,
 * an AsyncLocalStorage context manager and a diagnostic logger with `@opentelemetry/api` (`startSdk`
 * says why those are global). Rejects with `TracingConfigError` for settings it cannot honour
 * (`grpc`, an unknown sampler …) before loading anything: a daemon refuses to start rather than run
 * untraced.
 */
export async function startTracing(options: StartTracingOptions): Promise<Tracing> {
  const settings = tracingSettings(options.env);
  if (!settings.enabled) return disabledTracing(options.serviceName);
  const { startSdk } = await import('./sdk.js');
  return startSdk(settings, options);
}

/** Tracing off: a no-op tracer (a provider of our own, so a global one registered by anything else is never used). */
export function disabledTracing(serviceName = 'untraced'): Tracing {
  return {
    enabled: false,
    tracer: new ProxyTracerProvider().getTracer(`@llama-orch/${serviceName}`),
    close: () => Promise.resolve(),
  };
}
