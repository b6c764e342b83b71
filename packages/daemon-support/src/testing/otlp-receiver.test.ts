import { gzipSync } from 'node:zlib';
import { pino } from 'pino';
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { startTracing } from '../tracing/start-tracing.js';
import { startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from './otlp-receiver.js';

// The receiver against the real OTLP/HTTP exporters (through startTracing), in both encodings:
// whatever the encoding, the same spans come out.

const cleanups: Array<() => Promise<unknown> | unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
  vi.unstubAllEnvs();
});

async function receiver(): Promise<OtlpReceiver> {
  const r = await startOtlpReceiver();
  cleanups.push(() => r.close());
  return r;
}

/** Exports one small trace over `protocol` and returns what the receiver made of it. */
async function exportTrace(r: OtlpReceiver, protocol: 'http/protobuf' | 'http/json'): Promise<ReceivedSpan[]> {
  vi.stubEnv('OTEL_EXPORTER_OTLP_ENDPOINT', r.url);
  vi.stubEnv('OTEL_EXPORTER_OTLP_PROTOCOL', protocol);
  vi.stubEnv('OTEL_RESOURCE_ATTRIBUTES', 'deployment.environment.name=test,team=infra%2Cml');
  const tracing = await startTracing({
    serviceName: 'receiver-test',
    serviceVersion: '1.2.3',
    env: process.env,
    logger: pino({ level: 'silent' }),
  });
  cleanups.push(() => tracing.close());
  const root = tracing.tracer.startSpan('dispatch', {
    kind: SpanKind.SERVER,
    attributes: {
      'llorch.task_id': 'task-1',
      'llorch.slots': 4,
      'llorch.ratio': 0.5,
      'llorch.greedy': true,
      'llorch.models': ['a', 'b'],
      'llorch.big': 2 ** 40,
    },
  });
  const child = tracing.tracer.startSpan(
    'engine request',
    { kind: SpanKind.CLIENT, links: [{ context: root.spanContext(), attributes: { why: 'retry' } }] },
    trace.setSpan(ROOT_CONTEXT, root),
  );
  child.addEvent('first token', { i: 0 });
  child.setStatus({ code: SpanStatusCode.ERROR, message: 'engine went away' });
  child.end();
  root.setStatus({ code: SpanStatusCode.OK });
  root.end();
  await tracing.close();
  return r.waitFor((s) => s.length >= 2, 5000);
}

describe('OTLP receiver', () => {
  it.each(['http/protobuf', 'http/json'] as const)('decodes a trace exported over %s', async (protocol) => {
    const r = await receiver();
    const spans = await exportTrace(r, protocol);
    expect(r.errors()).toEqual([]);
    expect(r.exports()).toHaveLength(1);
    expect(r.exports()[0]?.encoding).toBe(protocol === 'http/json' ? 'json' : 'protobuf');
    const root = spans.find((s) => s.name === 'dispatch');
    const child = spans.find((s) => s.name === 'engine request');
    if (root === undefined || child === undefined) throw new Error(`missing spans: ${spans.map((s) => s.name).join()}`);

    expect(root.trace_id).toMatch(/^[0-9a-f]{32}$/);
    expect(root.span_id).toMatch(/^[0-9a-f]{16}$/);
    expect(root.parent_span_id).toBeUndefined();
    expect(root.kind).toBe('server');
    expect(root.status).toEqual({ code: 'ok', message: undefined });
    expect(root.flags & 0xff).toBe(1);
    expect(root.attributes).toEqual({
      'llorch.task_id': 'task-1',
      'llorch.slots': 4,
      'llorch.ratio': 0.5,
      'llorch.greedy': true,
      'llorch.models': ['a', 'b'],
      'llorch.big': 2 ** 40,
    });
    expect(root.end_time_unix_nano).toBeGreaterThanOrEqual(root.start_time_unix_nano);
    expect(root.start_time_unix_nano).toBeGreaterThan(BigInt(Date.now() - 60_000) * 1_000_000n);
    expect(root.scope).toEqual({ name: '@llama-orch/receiver-test', version: '1.2.3' });
    expect(root.resource).toMatchObject({
      'service.name': 'receiver-test',
      'service.version': '1.2.3',
      'deployment.environment.name': 'test',
      team: 'infra,ml',
      'telemetry.sdk.language': 'nodejs',
      'process.pid': process.pid,
    });
    expect(root.encoding).toBe(protocol === 'http/json' ? 'json' : 'protobuf');

    expect(child.trace_id).toBe(root.trace_id);
    expect(child.parent_span_id).toBe(root.span_id);
    expect(child.kind).toBe('client');
    expect(child.status).toEqual({ code: 'error', message: 'engine went away' });
    expect(child.events).toHaveLength(1);
    expect(child.events[0]).toMatchObject({ name: 'first token', attributes: { i: 0 } });
    expect(child.events[0]?.time_unix_nano).toBeGreaterThanOrEqual(child.start_time_unix_nano);
    expect(child.links).toEqual([
      { trace_id: root.trace_id, span_id: root.span_id, trace_state: undefined, attributes: { why: 'retry' } },
    ]);
  });

  it('gives the same spans whichever encoding carried them', async () => {
    const [a, b] = [await receiver(), await receiver()];
    const strip = (s: ReceivedSpan) => ({
      name: s.name,
      kind: s.kind,
      attributes: s.attributes,
      status: s.status,
      events: s.events.map((e) => ({ name: e.name, attributes: e.attributes })),
      links: s.links.length,
      parent: s.parent_span_id === undefined ? 'root' : 'child',
      scope: s.scope,
      service: s.resource['service.name'],
    });
    const proto = (await exportTrace(a, 'http/protobuf')).map(strip);
    const json = (await exportTrace(b, 'http/json')).map(strip);
    expect(json).toEqual(proto);
  });

  it('takes gzip bodies, and refuses what is not an OTLP trace export', async () => {
    const r = await receiver();
    const body = {
      resourceSpans: [
        {
          resource: { attributes: [{ key: 'service.name', value: { stringValue: 'hand' } }] },
          scopeSpans: [
            {
              scope: { name: 's' },
              spans: [
                {
                  traceId: '0af7651916cd43dd8448eb211c80319c',
                  spanId: 'b7ad6b7169203331',
                  parentSpanId: '',
                  name: 'by hand',
                  kind: 'SPAN_KIND_INTERNAL',
                  startTimeUnixNano: '1700000000000000000',
                  endTimeUnixNano: 1700000000000001000,
                  attributes: [
                    { key: 'huge', value: { intValue: '9007199254740993' } },
                    { key: 'raw', value: { bytesValue: Buffer.from('hi').toString('base64') } },
                    { key: 'kv', value: { kvlistValue: { values: [{ key: 'x', value: { doubleValue: 'NaN' } }] } } },
                  ],
                  status: {},
                },
              ],
            },
          ],
        },
      ],
    };
    const sent = await fetch(r.tracesUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' },
      body: gzipSync(JSON.stringify(body)),
    });
    expect(sent.status).toBe(200);
    expect(await sent.text()).toBe('{}');
    const [s] = r.spans();
    expect(s).toMatchObject({
      name: 'by hand',
      kind: 'internal',
      parent_span_id: undefined,
      start_time_unix_nano: 1700000000000000000n,
      status: { code: 'unset' },
      resource: { 'service.name': 'hand' },
    });
    expect(s?.attributes.huge).toBe(9007199254740993n);
    expect(s?.attributes.raw).toEqual(new Uint8Array(Buffer.from('hi')));
    expect(s?.attributes.kv).toEqual({ x: Number.NaN });
    expect(r.exports()[0]?.content_encoding).toBe('gzip');

    const bad = async (path: string, type: string, payload: string | Buffer) =>
      (await fetch(`${r.url}${path}`, { method: 'POST', headers: { 'content-type': type }, body: payload })).status;
    expect(
      await bad('/v1/traces', 'application/json', '{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"xyz"}]}]}]}'),
    ).toBe(400);
    expect(await bad('/v1/traces', 'application/x-protobuf', Buffer.from([0x0a, 0xff]))).toBe(400);
    expect(await bad('/v1/traces', 'text/plain', 'hi')).toBe(415);
    expect(await bad('/v1/metrics', 'application/json', '{}')).toBe(404);
    expect(r.errors()).toHaveLength(4);
    expect(r.errors()[0]).toMatch(/^400 undecodable json body: .*traceId: not a 16-byte hex id/);
    expect(r.spans()).toHaveLength(1);
  });

  it('waitFor rejects with what came when the predicate never holds', async () => {
    const r = await receiver();
    await expect(r.waitFor((s) => s.length > 0, 50)).rejects.toThrow(/not satisfied within 50 ms; 0 spans/);
  });
});
