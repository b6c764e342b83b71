import { randomBytes } from 'node:crypto';
import { OrchestratorConfigSchema } from '@llama-orch/contracts';
import { startTracing, type Tracing } from '@llama-orch/daemon-support/tracing';
import { startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from '@llama-orch/daemon-support/otlp-receiver';
import { FixturePoolManager } from '@llama-orch/fixture-pool-manager';
import { request } from 'undici';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { buildApp, type OrchdApp } from '../app.js';
import { until } from '../testing/replica-harness.js';
import { captureLogger, taskBody } from '../testing/test-helpers.js';
import { createUpstreamDispatchers } from '../upstream/dispatchers.js';

// orchestratord's own spans (one process, a FIXTURE node that makes none): the request's server
// span under the client's traceparent, the task span and its children, the dispatch's traceparent,
// log lines and exemplars. Both daemons and replicas: packages/cli/src/up-tracing.process.test.ts.

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
  vi.unstubAllEnvs();
});

interface Traced {
  app: OrchdApp;
  url: string;
  receiver: OtlpReceiver | undefined;
  logs: ReturnType<typeof captureLogger>;
  node: FixturePoolManager;
}

async function start(traced: boolean): Promise<Traced> {
  let receiver: OtlpReceiver | undefined;
  let tracing: Tracing | undefined;
  const logs = captureLogger();
  if (traced) {
    const r = await startOtlpReceiver();
    receiver = r;
    cleanups.push(() => r.close());
    vi.stubEnv('OTEL_EXPORTER_OTLP_ENDPOINT', r.url);
    vi.stubEnv('OTEL_BSP_SCHEDULE_DELAY', '20');
    const t = await startTracing({ serviceName: 'orchestratord', env: process.env, logger: logs.logger });
    tracing = t;
    cleanups.push(() => t.close());
  }
  const upstream = createUpstreamDispatchers();
  cleanups.push(() => upstream.close());
  const config = OrchestratorConfigSchema.parse({ heartbeat_interval_ms: 1000 });
  const app = await buildApp(
    {
      logger: logs.logger,
      upstream: upstream.http1,
      upstreamH2c: upstream.h2c,
      ...(tracing !== undefined ? { tracing } : {}),
    },
    config,
  );
  cleanups.push(() => app.close());
  const url = await app.listen({ port: 0, host: '127.0.0.1' });
  const node = await FixturePoolManager.start({ nodeId: 'n1', pools: [{ pool_id: 'p', models: ['m'], slots: 1 }] });
  cleanups.push(() => node.close());
  expect(await node.register(url)).toBe(200);
  await node.startHeartbeats(url, 200);
  cleanups.push(() => Promise.resolve(node.stopHeartbeats()));
  await until(() => app.services.registry.poolsForModel('m')[0]?.node_state === 'online', 'n1 online');
  return { app, url, receiver, logs, node };
}

const hex = (bytes: number) => randomBytes(bytes).toString('hex');

/** A client's trace: its traceparent header and ids. */
function clientTrace() {
  const traceId = hex(16);
  const spanId = hex(8);
  return { traceId, spanId, traceparent: `00-${traceId}-${spanId}-01` };
}

const byName = (spans: readonly ReceivedSpan[], name: string) => spans.filter((s) => s.name === name);

describe('orchestratord tracing', () => {
  it('a /v2 task is one tree under the client’s span: request, task (GenAI attributes), admission, queue wait, placement, dispatch', async () => {
    const { url, receiver, logs, node } = await start(true);
    const client = clientTrace();
    const res = await request(`${url}/v2/tasks`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'text/event-stream', traceparent: client.traceparent },
      body: JSON.stringify(taskBody({ max_tokens: 5 })),
    });
    expect(res.statusCode).toBe(200);
    expect(await res.body.text()).toContain('event: end');

    const spans = (
      await receiver!.waitFor(
        (all) => all.some((s) => s.trace_id === client.traceId && s.name === 'text_completion m'),
        5000,
      )
    ).filter((s) => s.trace_id === client.traceId);
    const [server] = byName(spans, 'POST /v2/tasks');
    expect(server).toMatchObject({ kind: 'server', parent_span_id: client.spanId });
    expect(server!.attributes).toMatchObject({ 'http.route': '/v2/tasks', 'http.response.status_code': 200 });
    const [task] = byName(spans, 'text_completion m');
    expect(task!.parent_span_id).toBe(server!.span_id);
    expect(task!.attributes).toMatchObject({
      'gen_ai.operation.name': 'text_completion',
      'gen_ai.request.model': 'm',
      'gen_ai.request.max_tokens': 5,
      'gen_ai.usage.output_tokens': 5,
      'gen_ai.response.finish_reasons': ['length'],
      'llorch.pool_id': 'p',
      'llorch.node_id': 'n1',
    });
    expect(typeof task!.attributes['gen_ai.usage.input_tokens']).toBe('number');
    expect(task!.attributes['llorch.ttft_ms']).toBeGreaterThanOrEqual(0);
    expect(task!.events.map((e) => e.name)).toContain('first token');
    for (const name of ['admission', 'queue wait', 'placement', 'dispatch'])
      expect(
        byName(spans, name).map((s) => s.parent_span_id),
        name,
      ).toEqual([task!.span_id]);
    const [dispatch] = byName(spans, 'dispatch');
    expect(dispatch).toMatchObject({ kind: 'client' });
    expect(dispatch!.events.map((e) => e.name)).toContain('first token');
    // one tree: every span's parent is in it, or is the client's span
    const ids = new Set(spans.map((s) => s.span_id));
    for (const s of spans) expect(ids.has(s.parent_span_id!) || s.parent_span_id === client.spanId).toBe(true);

    // the node got the dispatch span's traceparent
    expect(node.dispatches.at(-1)?.traceparent).toBe(`00-${client.traceId}-${dispatch!.span_id}-01`);
    // the request's and the task's log lines carry the trace
    const lines = logs.records().filter((l) => l.trace_id === client.traceId);
    expect(lines.map((l) => l.msg)).toEqual(expect.arrayContaining(['task admitted', 'task placed']));
    expect(lines.every((l) => l.span_id === server!.span_id)).toBe(true);
    // the TTFT histogram keeps the trace as an exemplar, shown to an OpenMetrics scrape only
    const om = await request(`${url}/metrics`, { headers: { accept: 'application/openmetrics-text; version=1.0.0' } });
    expect(om.headers['content-type']).toContain('application/openmetrics-text');
    expect(await om.body.text()).toMatch(
      new RegExp(`llorch_task_first_token_seconds_bucket\\{[^}]*\\} \\d+ # \\{trace_id="${client.traceId}"\\}`),
    );
    const prom = await request(`${url}/metrics`);
    expect(await prom.body.text()).not.toContain(client.traceId);
  });

  it('a refused task ends its spans with the error; a request without traceparent starts a trace', async () => {
    const { url, receiver } = await start(true);
    const res = await request(`${url}/v2/tasks`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(taskBody({ model_ref: 'nowhere' })),
    });
    expect(res.statusCode).toBe(404);
    await res.body.dump();
    const spans = await receiver!.waitFor((all) => all.some((s) => s.name === 'text_completion nowhere'), 5000);
    const [task] = byName(spans, 'text_completion nowhere');
    expect(task!.status.code).toBe('error');
    expect(task!.attributes['error.type']).toBe('MODEL_NOT_FOUND');
    const [server] = byName(spans, 'POST /v2/tasks');
    expect(server!.parent_span_id).toBeUndefined();
    expect(task!.parent_span_id).toBe(server!.span_id);
  });

  it('off: no span work, no trace ids in logs, the node gets no traceparent', async () => {
    const { url, logs, node } = await start(false);
    const client = clientTrace();
    const res = await request(`${url}/v2/tasks`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'text/event-stream', traceparent: client.traceparent },
      body: JSON.stringify(taskBody({ max_tokens: 2 })),
    });
    expect(await res.body.text()).toContain('event: end');
    expect(node.dispatches.at(-1)?.traceparent).toBeUndefined();
    expect(logs.records().some((l) => 'trace_id' in l)).toBe(false);
  });
});
