import { SpanKind, SpanStatusCode, trace, type Context, type Tracer } from '@opentelemetry/api';
import { extractContext, traceFields } from '@llama-orch/daemon-support/tracing';
import type { FastifyPluginCallback } from 'fastify';
import fp from 'fastify-plugin';

declare module 'fastify' {
  interface FastifyRequest {
    /** The request's trace context (its server span), with tracing on: what it starts is its child. */
    traceContext: Context | undefined;
  }
}

/** Routes not traced: probes, scrapes, node heartbeats and page assets, many times a second and saying nothing of a request. */
const UNTRACED = new Set([
  '/metrics',
  '/healthz',
  '/readyz',
  '/v2/nodes/:id/heartbeat',
  '/',
  '/dashboard',
  '/dashboard/*',
]);

/**
 * With tracing on (registered only then): each request's server span, a child of the client's W3C
 * `traceparent` (or a new trace), named `METHOD route`, ended when its response closes (an event
 * stream included) with the status code. Its context is `request.traceContext`, and every line the
 * request logs carries `trace_id` and `span_id`. Register it after the correlation plugin.
 */
const requestTracing: FastifyPluginCallback<{ tracer: Tracer }> = (app, { tracer }, done) => {
  app.decorateRequest('traceContext', undefined);
  // Callback-style, like the correlation hook: no promise or microtask turn per request.
  app.addHook('onRequest', (req, reply, next) => {
    const route = req.routeOptions.url;
    if (route === undefined || UNTRACED.has(route) || route.startsWith('/docs')) return next();
    const parent = extractContext(req.headers);
    const span = tracer.startSpan(
      `${req.method} ${route}`,
      {
        kind: SpanKind.SERVER,
        attributes: {
          'http.request.method': req.method,
          'http.route': route,
          'url.path': req.url.split('?', 1)[0] ?? req.url,
          'llorch.correlation_id': req.id,
        },
      },
      parent,
    );
    req.traceContext = trace.setSpan(parent, span);
    req.log = reply.log = req.log.child(traceFields(span));
    reply.raw.once('close', () => {
      const status = reply.raw.statusCode;
      span.setAttribute('http.response.status_code', status);
      if (status >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
      if (!reply.raw.writableFinished) span.setAttribute('llorch.client_left', true);
      span.end();
    });
    next();
  });
  done();
};

export const requestTracingPlugin = fp(requestTracing, { name: 'request-tracing', fastify: '5.x' });
