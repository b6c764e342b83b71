import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'undici';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { DispatchEvent, PoolStatus } from '@llama-orch/contracts';
import { startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from '@llama-orch/daemon-support/otlp-receiver';
import { ensureCpuTestEngine } from '@llama-orch/engine-provisioner';
import { buildDist, lineWith, spawnDaemon, type DaemonChild } from './testing/daemon-process.js';
import { ndjsonEvents, report, until } from './testing/harness.js';

// Process level: the built daemon with the standard OTEL_* variables pointing at an OTLP/HTTP
// receiver (the fixture a collector stands for), a real llama-server pool over the synthetic model.
const TOKEN = 'tracing-process-test-token-0123456789';
const OTLP_DEFAULT_PORT = 4318;

/** Whatever OTEL_* the test runner has is not the daemon's: each test says what it sets. */
const NO_OTEL = Object.fromEntries(
  Object.keys(process.env).flatMap((k) => (k.startsWith('OTEL_') ? [[k, undefined]] : [])),
);

const cleanups: Array<() => Promise<unknown> | unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

let dir: string | undefined;
let receiver: OtlpReceiver;
beforeAll(async () => {
  await buildDist();
  await ensureCpuTestEngine();
  dir = mkdtempSync(join(tmpdir(), 'pm-tracing-'));
  // On the OTLP default port when it is free: a daemon that exported without being asked would send there.
  receiver = await startOtlpReceiver({ port: OTLP_DEFAULT_PORT }).catch(() => startOtlpReceiver());
}, 45 * 60_000);
afterAll(async () => {
  await receiver?.close();
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
});

/** A config of one small pool over the synthetic model. */
function writeConfig(name: string): string {
  const base = dir as string;
  const config = join(base, `${name}.yaml`);
  writeFileSync(
    config,
    `node:
  id: ${name}
  addr: 127.0.0.1:0
  dispatch_h2c_addr: 'off'
runtime_dir: ${join(base, `${name}-run`)}
pools:
  - id: p0
    model: synthetic:llama
    ctx: 512
    threads: 1
`,
  );
  return config;
}

async function startDaemon(
  name: string,
  env: Record<string, string | undefined>,
): Promise<{ d: DaemonChild; url: string }> {
  const config = writeConfig(name);
  const d = spawnDaemon(config, { token: TOKEN, stdout: 'read', env: { ...NO_OTEL, ...env } });
  cleanups.push(() => d.kill());
  const listening = await lineWith(d, 'listening');
  report(`${name}: daemon code ${JSON.stringify((listening.startup as { code?: unknown } | undefined)?.code)}`);
  const url = String(listening.url);
  await until(async () => (await pool(url)).ready, 'p0 ready', 120_000, 50);
  return { d, url };
}

async function pool(url: string): Promise<PoolStatus> {
  const res = await request(`${url}/v2/pools/p0`, { headers: { authorization: `Bearer ${TOKEN}` } });
  return (await res.body.json()) as PoolStatus;
}

/** A dispatch of `body` (with a fresh task id); its status and events. */
async function dispatch(
  url: string,
  body: Record<string, unknown>,
  headers: Record<string, string> = {},
  poolId = 'p0',
): Promise<{ taskId: string; status: number; events: DispatchEvent[] }> {
  const taskId = randomUUID();
  const res = await request(`${url}/v2/pools/${poolId}/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ task_id: taskId, ...body }),
  });
  if (res.statusCode !== 200) {
    await res.body.dump();
    return { taskId, status: res.statusCode, events: [] };
  }
  // Token, end and error events, or one `result` line (stream: false).
  const events = (await res.body.text())
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as DispatchEvent);
  return { taskId, status: 200, events };
}

/** A W3C traceparent of a new trace, as orchestratord's dispatch would send it. */
function traceparent(): { header: string; traceId: string; parentId: string } {
  const traceId = randomBytes(16).toString('hex');
  const parentId = randomBytes(8).toString('hex');
  return { header: `00-${traceId}-${parentId}-01`, traceId, parentId };
}

const ofTask = (taskId: string) => (s: ReceivedSpan) => s.attributes['llorch.task_id'] === taskId;
const named = (spans: readonly ReceivedSpan[], name: string) => spans.filter((s) => s.name === name);

describe('pool-managerd tracing', () => {
  it('exports a dispatch span under the caller traceparent and an engine request span under it; its lines carry the ids', async () => {
    const { d, url } = await startDaemon('traced', {
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_BSP_SCHEDULE_DELAY: '50',
    });
    expect(await lineWith(d, 'tracing on')).toMatchObject({
      component: 'tracing',
      service_name: 'pool-managerd',
      endpoint: `${receiver.url}/v1/traces`,
      protocol: 'http/protobuf',
    });
    const model = (await pool(url)).models[0];

    // A streamed completion under orchestratord's trace.
    const parent = traceparent();
    const streamed = await dispatch(
      url,
      { prompt: 'Hello', max_tokens: 6, greedy: true },
      { traceparent: parent.header },
    );
    expect(streamed.status).toBe(200);
    const end = streamed.events.at(-1);
    if (end?.type !== 'end') throw new Error(`no end event: ${JSON.stringify(end)}`);
    let spans = (await receiver.waitFor((s) => s.filter(ofTask(streamed.taskId)).length === 2, 15_000)).filter(
      ofTask(streamed.taskId),
    );
    const [root] = named(spans, 'dispatch');
    const [engine] = named(spans, 'engine request');
    expect(root).toMatchObject({
      trace_id: parent.traceId,
      parent_span_id: parent.parentId,
      kind: 'server',
      status: { code: 'ok' },
      attributes: {
        'llorch.task_id': streamed.taskId,
        'llorch.pool_id': 'p0',
        'llorch.node_id': 'traced',
        'llorch.model': model,
        'llorch.workload': 'completion',
        'llorch.stream': true,
        'llorch.outcome': 'end',
        'llorch.tokens_out': end.tokens_out,
        'http.route': '/v2/pools/:id/completions',
      },
      resource: { 'service.name': 'pool-managerd' },
    });
    expect(engine).toMatchObject({
      trace_id: parent.traceId,
      parent_span_id: root?.span_id,
      kind: 'client',
      status: { code: 'ok' },
      attributes: {
        'llorch.task_id': streamed.taskId,
        'gen_ai.request.model': model,
        'gen_ai.usage.output_tokens': end.tokens_out,
      },
    });
    // The first token is an event of the engine request, inside it; no span per token.
    expect(engine?.events.map((e) => e.name)).toEqual(['first token']);
    const firstToken = engine?.events[0]?.time_unix_nano ?? 0n;
    expect(firstToken).toBeGreaterThanOrEqual(engine?.start_time_unix_nano ?? Infinity);
    expect(firstToken).toBeLessThanOrEqual(engine?.end_time_unix_nano ?? 0n);
    expect(root?.start_time_unix_nano).toBeLessThanOrEqual(engine?.start_time_unix_nano ?? 0n);
    // Every line about the dispatch carries the trace and the dispatch span (lines are written in batches).
    const linesOf = (taskId: string) => d.lines.filter((l) => l.task_id === taskId);
    await until(() => linesOf(streamed.taskId).length >= 3, 'the dispatch lines');
    const lines = linesOf(streamed.taskId);
    expect(lines.map((l) => l.msg)).toEqual(['dispatch started', 'engine request sent', 'dispatch ended']);
    for (const l of lines) expect(l).toMatchObject({ trace_id: parent.traceId, span_id: root?.span_id });

    // A non-streamed answer without a traceparent starts a trace of its own.
    const answered = await dispatch(url, { prompt: 'Hello', max_tokens: 4, greedy: true, stream: false });
    expect((answered.events.at(-1) as { type: string } | undefined)?.type).toBe('result');
    spans = (await receiver.waitFor((s) => s.filter(ofTask(answered.taskId)).length === 2, 15_000)).filter(
      ofTask(answered.taskId),
    );
    const [answerRoot] = named(spans, 'dispatch');
    expect(answerRoot).toMatchObject({ parent_span_id: undefined, status: { code: 'ok' } });
    expect(answerRoot?.attributes['llorch.stream']).toBe(false);
    expect(named(spans, 'engine request')[0]).toMatchObject({ parent_span_id: answerRoot?.span_id });

    // A refusal (unknown pool) is a dispatch span with the error's code, and no engine request.
    const refusedParent = traceparent();
    const refused = await dispatch(url, { prompt: 'x', max_tokens: 1 }, { traceparent: refusedParent.header }, 'nope');
    expect(refused.status).toBe(404);
    spans = await receiver.waitFor((s) => s.some(ofTask(refused.taskId)), 15_000);
    expect(spans.filter(ofTask(refused.taskId))).toMatchObject([
      {
        name: 'dispatch',
        trace_id: refusedParent.traceId,
        status: { code: 'error' },
        attributes: { 'llorch.outcome': 'error', 'llorch.error_code': 'NOT_FOUND' },
      },
    ]);

    // A client that goes away mid-stream: both spans end as canceled (not an error), after the first token.
    const cancelParent = traceparent();
    const taskId = randomUUID();
    const res = await request(`${url}/v2/pools/p0/completions`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${TOKEN}`,
        'content-type': 'application/json',
        traceparent: cancelParent.header,
      },
      body: JSON.stringify({ task_id: taskId, prompt: 'Once upon a time', max_tokens: 400 }),
    });
    for await (const ev of ndjsonEvents(res.body)) if (ev.type === 'token') break;
    res.body.destroy();
    spans = (await receiver.waitFor((s) => s.filter(ofTask(taskId)).length === 2, 15_000)).filter(ofTask(taskId));
    for (const s of spans) {
      expect(s.trace_id).toBe(cancelParent.traceId);
      expect(s.status.code).toBe('unset');
      expect(s.attributes['llorch.outcome']).toBe('canceled');
    }
    expect(named(spans, 'engine request')[0]?.events.map((e) => e.name)).toEqual(['first token']);
    expect(
      await until(() => d.lines.find((l) => l.task_id === taskId && l.msg === 'dispatch canceled'), 'the cancel line'),
    ).toMatchObject({ trace_id: cancelParent.traceId });

    d.child.kill('SIGTERM');
    expect((await d.exited).code).toBe(0);
    expect(receiver.errors()).toEqual([]);
  }, 180_000);

  it('settings it cannot honour stop the start before anything is spawned (grpc)', async () => {
    const d = spawnDaemon(writeConfig('grpc'), {
      token: TOKEN,
      stdout: 'read',
      env: { ...NO_OTEL, OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4317', OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' },
    });
    cleanups.push(() => d.kill());
    expect((await d.exited).code).toBe(1);
    const fatal = d.lines.find((l) => l.msg === 'pool-managerd failed to start') as { err?: { message?: string } };
    expect(fatal?.err?.message).toMatch(
      /OTEL_EXPORTER_OTLP_PROTOCOL=grpc is not supported: no gRPC exporter is installed/,
    );
    expect(d.lines.some((l) => l.msg === 'engine spawned' || l.msg === 'listening')).toBe(false);
  }, 60_000);

  it('with no OTEL_* variable: no tracing, no trace ids in the lines, nothing exported', async () => {
    const { d, url } = await startDaemon('untraced', {});
    const parent = traceparent();
    const run = await dispatch(url, { prompt: 'Hello', max_tokens: 4, greedy: true }, { traceparent: parent.header });
    expect(run.events.at(-1)?.type).toBe('end');
    const pid = d.child.pid;
    // A graceful exit flushes whatever a tracer would hold.
    d.child.kill('SIGTERM');
    expect((await d.exited).code).toBe(0);
    expect(d.lines.some((l) => l.msg === 'tracing on')).toBe(false);
    expect(d.lines.filter((l) => 'trace_id' in l || 'span_id' in l)).toEqual([]);
    expect(d.lines.filter((l) => l.task_id === run.taskId).length).toBeGreaterThan(0);
    expect(receiver.spans().filter((s) => s.resource['process.pid'] === pid || s.trace_id === parent.traceId)).toEqual(
      [],
    );
    if (!receiver.url.endsWith(`:${OTLP_DEFAULT_PORT}`))
      report(`port ${OTLP_DEFAULT_PORT} was taken: the default endpoint was not watched (${receiver.url})`);
  }, 180_000);
});
