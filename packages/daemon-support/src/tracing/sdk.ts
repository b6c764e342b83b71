// The OpenTelemetry SDK side of tracing: imported only by startTracing when tracing is on.
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { diag, DiagLogLevel, propagation, type DiagLogger } from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter as OtlpJsonExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPTraceExporter as OtlpProtoExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { defaultResource, detectResources, envDetector, resourceFromAttributes } from '@opentelemetry/resources';
import { BasicTracerProvider, BatchSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { ATTR_SERVICE_NAME, ATTR_SERVICE_VERSION } from '@opentelemetry/semantic-conventions';
import type { Log } from '../log.js';
import type { StartTracingOptions, Tracing } from './tracing.js';
import type { TracingSettings } from './tracing-settings.js';

/** Default of {@link StartTracingOptions.closeTimeoutMs}, ms. */
const CLOSE_TIMEOUT_MS = 5000;

/**
 * Tracing on: a tracer provider with a batch processor and the OTLP/HTTP exporter of the
 * configured encoding. The exporter, the batch processor and the sampler read their own standard
 * variables (endpoint, headers, timeout, compression, `OTEL_BSP_*`, `OTEL_TRACES_SAMPLER[_ARG]`),
 * and the resource is `service.name` = the daemon's name, `service.version`, `service.instance.id`
 * (new per start: replicas on one host stay apart), `host.name` and `process.pid`, overridden by
 * `OTEL_SERVICE_NAME` and `OTEL_RESOURCE_ATTRIBUTES` (the SDK's env detector).
 *
 * The tracer provider is not registered globally: spans come from {@link Tracing.tracer}, which the
 * daemon hands down, and every span's parent is passed explicitly (a `Context` the daemon carries:
 * the request's, the task's). No context manager is registered: an AsyncLocalStorage one turns on
 * async hooks the first time anything calls `context.with()` — the OTLP exporter does, on every
 * export — and from then on every promise of the process costs ~2× (measured: 300,000 awaits 15 →
 * 35 ms of CPU), which the relay benchmark saw as +35 % CPU per token. Two things are registered,
 * because `@opentelemetry/api` keeps them process-wide by design and nothing else does their job:
 * - the W3C trace-context propagator: `extractContext` / `injectTraceparent` (and any library that
 *   propagates) go through `propagation`, a no-op until one is registered, so tracing off costs nothing;
 * - the diagnostic logger: the SDK reports failed exports and bad values only through `diag`.
 * Each is registered only if nothing holds it yet and unregistered by the `close()` of the tracing
 * that registered it: one process runs one tracing at a time (a second one shares the first's).
 */
export function startSdk(settings: Extract<TracingSettings, { enabled: true }>, options: StartTracingOptions): Tracing {
  const log = options.logger.child({ component: 'tracing' });
  const base = resourceFromAttributes({
    [ATTR_SERVICE_NAME]: options.serviceName,
    ...(options.serviceVersion !== undefined ? { [ATTR_SERVICE_VERSION]: options.serviceVersion } : {}),
    'service.instance.id': randomUUID(),
    'host.name': hostname(),
    'process.pid': process.pid,
  });
  // Later merges win: the env detector's attributes over the daemon's, over the SDK's defaults.
  const resource = defaultResource()
    .merge(base)
    .merge(detectResources({ detectors: [envDetector] }));
  const exporter = settings.protocol === 'http/json' ? new OtlpJsonExporter() : new OtlpProtoExporter();
  const provider = new BasicTracerProvider({ resource, spanProcessors: [new BatchSpanProcessor(exporter)] });

  const ownsPropagator = propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  const ownsDiag = diag.setLogger(diagToLog(log), { logLevel: DiagLogLevel.WARN, suppressOverrideMessage: true });

  log.info(
    {
      service_name: resource.attributes[ATTR_SERVICE_NAME],
      endpoint: settings.endpoint,
      protocol: settings.protocol,
      sampler: settings.sampler,
    },
    'tracing on',
  );
  const closeTimeoutMs = options.closeTimeoutMs ?? CLOSE_TIMEOUT_MS;
  let closing: Promise<void> | undefined;
  return {
    enabled: true,
    tracer: provider.getTracer(`@llama-orch/${options.serviceName}`, options.serviceVersion),
    close: () => {
      closing ??= (async () => {
        try {
          if ((await within(provider.shutdown(), closeTimeoutMs)) === 'timeout')
            log.warn({ timeout_ms: closeTimeoutMs }, 'tracing: the last spans were not exported in time (dropped)');
        } catch (err) {
          log.warn({ err }, 'tracing: the last spans could not be exported (dropped)');
        } finally {
          if (ownsPropagator) propagation.disable();
          if (ownsDiag) diag.disable();
        }
      })();
      return closing;
    },
  };
}

/** `p`'s outcome, or `timeout` after `ms` (the timer never holds the process). */
async function within(p: Promise<unknown>, ms: number): Promise<'done' | 'timeout'> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(() => resolve('timeout'), ms);
    timer.unref();
  });
  try {
    return await Promise.race([p.then(() => 'done' as const), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** The SDK's diagnostics (warn and above: failed exports, refused values) as log lines. */
function diagToLog(log: Log): DiagLogger {
  const line = (message: string, args: unknown[]): void => {
    if (args.length === 0) log.warn(`tracing: ${message}`);
    else log.warn({ details: args.map((a) => (a instanceof Error ? a.message : String(a))) }, `tracing: ${message}`);
  };
  return {
    error: (message, ...args) => line(message, args),
    warn: (message, ...args) => line(message, args),
    info: () => undefined,
    debug: () => undefined,
    verbose: () => undefined,
  };
}
