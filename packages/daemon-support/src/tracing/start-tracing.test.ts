import { createServer, type Server, type Socket } from 'node:net';
import { pino } from 'pino';
import { context, ROOT_CONTEXT, SpanKind, trace } from '@opentelemetry/api';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { startOtlpReceiver, type OtlpReceiver } from '../testing/otlp-receiver.js';
import { extractContext, injectTraceparent, traceFields } from './propagation.js';
import { startTracing, type Tracing } from './start-tracing.js';
import { TracingConfigError } from './tracing-settings.js';

// startTracing with the real SDK and exporters against the OTLP receiver fixture. The SDK reads
// its variables from process.env, so the tests stub process.env and pass it.

const cleanups: Array<() => Promise<unknown> | unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
  vi.unstubAllEnvs();
});

function capture() {
  const lines: Array<Record<string, unknown>> = [];
  const logger = pino(
    { level: 'debug' },
    { write: (s: string) => lines.push(JSON.parse(s) as Record<string, unknown>) },
  );
  return { lines, logger };
}

async function receiver(): Promise<OtlpReceiver> {
  const r = await startOtlpReceiver();
  cleanups.push(() => r.close());
  return r;
}

async function start(env: Record<string, string>, closeTimeoutMs?: number) {
  for (const [k, v] of Object.entries(env)) vi.stubEnv(k, v);
  const { lines, logger } = capture();
  const tracing = await startTracing({
    serviceName: 'test-daemon',
    env: process.env,
    logger,
    ...(closeTimeoutMs !== undefined ? { closeTimeoutMs } : {}),
  });
  cleanups.push(() => tracing.close());
  return { tracing, lines };
}

const REMOTE_TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const REMOTE_SPAN = '00f067aa0ba902b7';
const TRACEPARENT = `00-${REMOTE_TRACE}-${REMOTE_SPAN}-01`;

/** A server span under the caller's traceparent and a client span under it, as a daemon makes them. */
function serverAndClient(tracing: Tracing) {
  const parent = extractContext({ traceparent: TRACEPARENT, host: 'x' });
  const server = tracing.tracer.startSpan('dispatch', { kind: SpanKind.SERVER }, parent);
  const client = tracing.tracer.startSpan('engine request', { kind: SpanKind.CLIENT }, trace.setSpan(parent, server));
  const headers = injectTraceparent({ 'content-type': 'application/json' }, trace.setSpan(ROOT_CONTEXT, client));
  return { server, client, headers };
}

describe('startTracing', () => {
  it('with no endpoint: off, a no-op tracer, helpers that do nothing, a close that resolves', async () => {
    const { tracing, lines } = await start({});
    expect(tracing.enabled).toBe(false);
    const span = tracing.tracer.startSpan('x');
    expect(span.isRecording()).toBe(false);
    expect(trace.getSpanContext(extractContext({ traceparent: TRACEPARENT }))).toBeUndefined();
    const { headers } = serverAndClient(tracing);
    expect(headers).toEqual({ 'content-type': 'application/json' });
    await expect(tracing.close()).resolves.toBeUndefined();
    expect(lines).toEqual([]);
  });

  it('refuses grpc before loading anything', async () => {
    await expect(
      start({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4317', OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' }),
    ).rejects.toThrow(TracingConfigError);
  });

  it.each(['http/protobuf', 'http/json'] as const)(
    'on over %s: spans continue the caller trace, the outgoing request carries traceparent, traceFields gives the ids',
    async (protocol) => {
      const r = await receiver();
      const { tracing, lines } = await start({
        OTEL_EXPORTER_OTLP_ENDPOINT: r.url,
        OTEL_EXPORTER_OTLP_PROTOCOL: protocol,
      });
      expect(tracing.enabled).toBe(true);
      expect(lines).toContainEqual(
        expect.objectContaining({
          msg: 'tracing on',
          component: 'tracing',
          service_name: 'test-daemon',
          endpoint: `${r.url}/v1/traces`,
          protocol,
          sampler: 'parentbased_always_on',
        }),
      );
      const { server, client, headers } = serverAndClient(tracing);
      expect(traceFields(server)).toEqual({ trace_id: REMOTE_TRACE, span_id: server.spanContext().spanId });
      expect(headers).toEqual({
        'content-type': 'application/json',
        traceparent: `00-${REMOTE_TRACE}-${client.spanContext().spanId}-01`,
      });
      client.end();
      server.end();
      await tracing.close();
      const spans = await r.waitFor((s) => s.length === 2);
      const dispatch = spans.find((s) => s.name === 'dispatch');
      const engine = spans.find((s) => s.name === 'engine request');
      expect(dispatch).toMatchObject({ trace_id: REMOTE_TRACE, parent_span_id: REMOTE_SPAN, kind: 'server' });
      expect(engine).toMatchObject({ trace_id: REMOTE_TRACE, parent_span_id: dispatch?.span_id, kind: 'client' });
      expect(dispatch?.resource['service.name']).toBe('test-daemon');
      expect(dispatch?.resource['service.instance.id']).toMatch(/^[0-9a-f-]{36}$/);
    },
  );

  it('OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES override the daemon name; the SDK reads the sampler', async () => {
    const r = await receiver();
    const first = await start({
      OTEL_EXPORTER_OTLP_ENDPOINT: r.url,
      OTEL_RESOURCE_ATTRIBUTES: 'service.name=from-attributes,region=eu',
    });
    first.tracing.tracer.startSpan('a').end();
    await first.tracing.close();
    vi.stubEnv('OTEL_SERVICE_NAME', 'from-service-name');
    const second = await start({});
    second.tracing.tracer.startSpan('b').end();
    await second.tracing.close();
    const spans = await r.waitFor((s) => s.length === 2);
    expect(spans.map((s) => [s.name, s.resource['service.name'], s.resource.region])).toEqual([
      ['a', 'from-attributes', 'eu'],
      ['b', 'from-service-name', 'eu'],
    ]);

    r.clear();
    const off = await start({ OTEL_TRACES_SAMPLER: 'always_off' });
    const span = off.tracing.tracer.startSpan('never');
    expect(span.isRecording()).toBe(false);
    span.end();
    await off.tracing.close();
    expect(r.exports()).toEqual([]);
  });

  it('registers the propagator and no context manager, and its close unregisters it', async () => {
    const r = await receiver();
    const { tracing } = await start({ OTEL_EXPORTER_OTLP_ENDPOINT: r.url });
    const span = tracing.tracer.startSpan('active');
    // No context manager (parents are passed explicitly): an AsyncLocalStorage one would make every
    // promise of the daemon pay for async hooks once the exporter's first context.with() ran.
    await context.with(trace.setSpan(context.active(), span), async () => {
      expect(trace.getActiveSpan()).toBeUndefined();
    });
    expect(injectTraceparent({}, trace.setSpan(ROOT_CONTEXT, span))).toHaveProperty('traceparent');
    span.end();
    await tracing.close();
    expect(injectTraceparent({}, trace.setSpan(ROOT_CONTEXT, span))).toEqual({});
    expect(trace.getSpanContext(extractContext({ traceparent: TRACEPARENT }))).toBeUndefined();
  });

  it('close is idempotent and bounded when the collector never answers', async () => {
    const sockets: Socket[] = [];
    const silent: Server = createServer((socket) => sockets.push(socket));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    cleanups.push(
      () =>
        new Promise((resolve) => {
          silent.close(resolve);
          for (const s of sockets) s.destroy();
        }),
    );
    const port = (silent.address() as { port: number }).port;
    const { tracing, lines } = await start({ OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${port}` }, 300);
    tracing.tracer.startSpan('stuck').end();
    const t0 = performance.now();
    const closing = tracing.close();
    expect(tracing.close()).toBe(closing);
    await closing;
    expect(performance.now() - t0).toBeLessThan(2000);
    expect(lines).toContainEqual(
      expect.objectContaining({
        level: 40,
        component: 'tracing',
        timeout_ms: 300,
        msg: expect.stringMatching(/not exported in time/),
      }),
    );
  });
});
