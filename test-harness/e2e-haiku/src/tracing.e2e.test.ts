import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from '@llama-orch/daemon-support/otlp-receiver';
import OpenAI from 'openai';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { repoRoot, startCluster, type Cluster } from './index.js';

// OpenTelemetry traces across both daemons (issue 43): two orchestratord replicas on Redis, a real
// pool-managerd and llama-server, every daemon exporting to an OTLP/HTTP receiver fixture (the
// replicas in http/json, pool-managerd in http/protobuf). For a /v1 stream, a /v2 task read through
// the other replica, and a non-streamed answer, each sent under a client's own traceparent: spans
// of both daemons in the client's trace, one connected tree, the GenAI attributes, log lines with
// the trace id, and an exemplar on an OpenMetrics scrape.
const MODEL = 'synthetic:llama?ctx=2048';
const cacheDir = process.env.LLORCH_TEST_CACHE_DIR ?? join(repoRoot(), '.cache', 'llama-orch');

let receiver: OtlpReceiver;
let cluster: Cluster;
let a: string;
let b: string;

beforeAll(async () => {
  receiver = await startOtlpReceiver();
  cluster = await startCluster({
    model: MODEL,
    nodes: 1,
    gpu: 'off',
    cacheDir,
    heartbeatMs: 500,
    readyTimeoutMs: 30 * 60_000,
    replicas: 2,
    // debug: pool-managerd narrates a dispatch at debug (orchestratord at info)
    env: { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_BSP_SCHEDULE_DELAY: '50', LOG_LEVEL: 'debug' },
    orchestratorEnv: { OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' },
  });
  [a, b] = cluster.replicas.map((r) => r.url) as [string, string];
  // the second replica sees the node through Redis
  const deadline = Date.now() + 30_000;
  for (;;) {
    const res = await request(`${b}/v2/pools`, { headers: { authorization: `Bearer ${cluster.token}` } });
    const body = (await res.body.json()) as { pools?: Array<{ ready: boolean }> };
    if (body.pools?.some((p) => p.ready) === true) break;
    if (Date.now() > deadline) throw new Error('the second replica never saw a ready pool');
    await new Promise((r) => setTimeout(r, 100));
  }
}, 31 * 60_000);

afterAll(async () => {
  await cluster?.close();
  await receiver?.close();
}, 60_000);

function clientTrace() {
  const traceId = randomBytes(16).toString('hex');
  const spanId = randomBytes(8).toString('hex');
  return { traceId, spanId, traceparent: `00-${traceId}-${spanId}-01` };
}

const service = (s: ReceivedSpan) => s.resource['service.name'];
const named = (spans: readonly ReceivedSpan[], name: string, svc: string) =>
  spans.filter((s) => s.name === name && service(s) === svc);

/** Whether every span's parent is in the trace or is the client's span (a span is exported when it ends, so a parent may come later). */
function connected(spans: readonly ReceivedSpan[], clientSpan: string): boolean {
  const ids = new Set(spans.map((s) => s.span_id));
  return spans.every((s) => s.parent_span_id === clientSpan || ids.has(s.parent_span_id ?? ''));
}

/** The trace's spans once the task span and the engine request have arrived and every parent with them. */
async function traceOf(client: { traceId: string; spanId: string }, taskSpan: string): Promise<ReceivedSpan[]> {
  const mine = (spans: readonly ReceivedSpan[]) => spans.filter((s) => s.trace_id === client.traceId);
  const all = await receiver.waitFor((spans) => {
    const t = mine(spans);
    return (
      t.some((s) => s.name === taskSpan) && t.some((s) => s.name === 'engine request') && connected(t, client.spanId)
    );
  }, 15_000);
  return mine(all);
}

/** Both daemons, one tree under the client's span, the dispatch chain, the GenAI attributes; returns the task span. */
function checkTree(
  spans: readonly ReceivedSpan[],
  client: { spanId: string },
  taskSpan: string,
  streamed = true,
): ReceivedSpan {
  expect(new Set(spans.map(service))).toEqual(new Set(['orchestratord', 'pool-managerd']));
  expect(connected(spans, client.spanId)).toBe(true);
  expect(spans.filter((s) => s.parent_span_id === client.spanId).length).toBeGreaterThanOrEqual(1);
  const [task] = named(spans, taskSpan, 'orchestratord');
  expect(task, taskSpan).toBeDefined();
  expect(task!.attributes).toMatchObject({
    'gen_ai.operation.name': taskSpan.split(' ')[0],
    'gen_ai.request.model': MODEL,
    'gen_ai.request.max_tokens': 8,
    'gen_ai.usage.output_tokens': 8,
    'gen_ai.response.finish_reasons': ['length'],
    'llorch.pool_id': 'p1',
    'llorch.node_id': 'e2e-node-1',
  });
  expect(task!.attributes['gen_ai.usage.input_tokens']).toBeGreaterThan(0);
  // a streamed task's first token is an event (a non-streamed answer has no tokens in flight)
  if (streamed) expect(task!.attributes['llorch.ttft_ms']).toBeGreaterThan(0);
  for (const child of ['admission', 'queue wait', 'placement', 'dispatch'])
    expect(
      named(spans, child, 'orchestratord').map((s) => s.parent_span_id),
      child,
    ).toEqual([task!.span_id]);
  const [out] = named(spans, 'dispatch', 'orchestratord');
  const [arrived] = named(spans, 'dispatch', 'pool-managerd');
  const [engine] = named(spans, 'engine request', 'pool-managerd');
  expect(out!.kind).toBe('client');
  expect(arrived).toMatchObject({ kind: 'server', parent_span_id: out!.span_id });
  expect(engine).toMatchObject({ kind: 'client', parent_span_id: arrived!.span_id });
  if (streamed) expect(engine!.events.map((e) => e.name)).toContain('first token');
  // each daemon exported in its own encoding
  expect(out!.encoding).toBe('json');
  expect(arrived!.encoding).toBe('protobuf');
  return task!;
}

/** Log lines of both daemons carry the trace id (each daemon's log reaches the harness within ~100 ms). */
async function checkLogs(traceId: string): Promise<void> {
  const lines = () => cluster.allLogs().filter((l) => l.json.trace_id === traceId);
  const daemons = () => new Set(lines().map((l) => l.source.split(':')[0]));
  for (let i = 0; i < 40 && daemons().size < 2; i++) await new Promise((r) => setTimeout(r, 50));
  expect(daemons(), `daemons logging trace ${traceId}`).toEqual(new Set(['orchestratord', 'pool-managerd']));
  expect(lines().map((l) => l.json.msg)).toEqual(expect.arrayContaining(['task admitted', 'task placed']));
}

const openai = (baseURL: string, traceparent: string) =>
  new OpenAI({
    baseURL: `${baseURL}/v1`,
    apiKey: cluster.token,
    maxRetries: 0,
    timeout: 60_000,
    defaultHeaders: { traceparent },
  });

describe('traces across replicas, pool-managerd and the engine', () => {
  const traced: string[] = [];

  it('a /v1 chat stream on one replica: one tree from the client’s span to the engine request', async () => {
    const client = clientTrace();
    const stream = await openai(b, client.traceparent).chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: 'Write a haiku about tracing' }],
      max_tokens: 8,
      stream: true,
      // the synthetic model's </s> banned: the answer runs to max_tokens
      logit_bias: { '2': -100 },
    } as OpenAI.ChatCompletionCreateParamsStreaming);
    for await (const _ of stream) void _;
    const spans = await traceOf(client, `chat ${MODEL}`);
    checkTree(spans, client, `chat ${MODEL}`);
    const [server] = named(spans, 'POST /v1/chat/completions', 'orchestratord');
    expect(server!.parent_span_id).toBe(client.spanId);
    // the request span carries the GenAI attributes too
    expect(server!.attributes['gen_ai.usage.output_tokens']).toBe(8);
    await checkLogs(client.traceId);
    traced.push(client.traceId);
  });

  it('a /v2 task admitted on one replica and read through the other: both replicas in the trace', async () => {
    const client = clientTrace();
    const headers = {
      authorization: `Bearer ${cluster.token}`,
      'content-type': 'application/json',
      traceparent: client.traceparent,
    };
    const admitted = await request(`${a}/v2/tasks`, {
      method: 'POST',
      headers,
      body: JSON.stringify({
        model_ref: MODEL,
        workload: 'chat',
        messages: [{ role: 'user', content: 'Write a haiku about queues' }],
        max_tokens: 8,
        sampling: { logit_bias: { '2': -100 } },
      }),
    });
    expect(admitted.statusCode).toBe(202);
    const { task_id } = (await admitted.body.json()) as { task_id: string };
    const events = await request(`${b}/v2/tasks/${task_id}/events`, { headers });
    expect(await events.body.text()).toContain('event: end');

    const spans = await traceOf(client, `chat ${MODEL}`);
    checkTree(spans, client, `chat ${MODEL}`);
    // B's server span, passed to A (the task's owner): A's is its child; two processes of orchestratord
    const [onB] = named(spans, 'GET /v2/tasks/:id/events', 'orchestratord').filter(
      (s) => s.parent_span_id === client.spanId,
    );
    const [onA] = named(spans, 'GET /v2/tasks/:id/events', 'orchestratord').filter(
      (s) => s.parent_span_id === onB?.span_id,
    );
    expect(onB, 'the read on the second replica').toBeDefined();
    expect(onA, 'the owner’s answer, under the second replica’s span').toBeDefined();
    expect(onA!.resource['service.instance.id']).not.toBe(onB!.resource['service.instance.id']);
    await checkLogs(client.traceId);
    traced.push(client.traceId);
  });

  it('a non-streamed /v1 answer, then an exemplar with a trace id on an OpenMetrics scrape', async () => {
    const client = clientTrace();
    const answer = await openai(a, client.traceparent).chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: 'Write a haiku about answers' }],
      max_tokens: 8,
      logit_bias: { '2': -100 },
    } as OpenAI.ChatCompletionCreateParamsNonStreaming);
    expect(answer.usage?.completion_tokens).toBe(8);
    const spans = await traceOf(client, `chat ${MODEL}`);
    checkTree(spans, client, `chat ${MODEL}`, false);
    await checkLogs(client.traceId);
    traced.push(client.traceId);

    const exemplars: string[] = [];
    for (const url of [a, b]) {
      const res = await request(`${url}/metrics`, { headers: { accept: 'application/openmetrics-text' } });
      const text = await res.body.text();
      for (const m of text.matchAll(
        /^llorch_task_first_token_seconds_bucket\{[^}]*\} \d+ # \{trace_id="([0-9a-f]{32})"\}/gm,
      ))
        exemplars.push(m[1]!);
    }
    expect(
      exemplars.some((id) => traced.includes(id)),
      `exemplars ${exemplars.join(', ')}`,
    ).toBe(true);
  });
});
