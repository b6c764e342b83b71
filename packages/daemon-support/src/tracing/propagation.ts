import { propagation, ROOT_CONTEXT, type Context, type Span } from '@opentelemetry/api';

/** Request headers as Node and Fastify give them (lower-case names; a repeated header as an array). */
export type IncomingHeaders = Readonly<Record<string, string | string[] | undefined>>;

/**
 * The caller's trace context from W3C `traceparent` / `tracestate` request headers: a context whose
 * span is the remote parent, to start a server span under. No (valid) `traceparent`, or tracing
 * off (no propagator registered): the root context, so the span starts a new trace.
 */
export function extractContext(headers: IncomingHeaders): Context {
  return propagation.extract(ROOT_CONTEXT, headers);
}

/**
 * Writes `traceparent` (and `tracestate` when there is one) for the span of `ctx` into `headers`
 * and returns them: the outgoing request is the child of that span. Nothing is written for a
 * context without a valid span or with tracing off.
 */
export function injectTraceparent<H extends Record<string, string>>(headers: H, ctx: Context): H {
  propagation.inject(ctx, headers);
  return headers;
}

/** What every log line of a traced request carries: `{ trace_id, span_id }` (lower-case hex). */
export interface TraceFields {
  trace_id: string;
  span_id: string;
}

/** The log fields of `span` (bind them in a child logger: `log.child(traceFields(span))`). */
export function traceFields(span: Span): TraceFields {
  const c = span.spanContext();
  return { trace_id: c.traceId, span_id: c.spanId };
}
