import { PassThrough } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { formatSseFrame } from '@llama-orch/contracts';
import { CliError, humanLogLine, metricTotal, renderTable, submit, type Target } from './index.js';
import { fixtureOrchestrator, type FixtureOrchestrator } from './testing/fixture-orchestrator.js';

describe('metricTotal', () => {
  it('sums every label set of a metric', () => {
    const text = '# TYPE queue_depth gauge\nqueue_depth{priority="interactive"} 2\nqueue_depth{priority="batch"} 3\nqueue_depth_other 9\n';
    expect(metricTotal(text, 'queue_depth')).toBe('5');
    expect(metricTotal(text, 'missing')).toBe('?');
  });
});

describe('renderTable', () => {
  it('aligns columns under a header rule', () => {
    expect(renderTable([['POOL', 'READY'], ['cpu0', 'yes'], ['gpu-long-name', 'no']])).toBe(
      'POOL           READY\n-------------  -----\ncpu0           yes\ngpu-long-name  no',
    );
  });
});

describe('humanLogLine', () => {
  it('prefers the human narration and keeps key facts', () => {
    expect(humanLogLine('pool-managerd', JSON.stringify({ level: 30, msg: 'build', human: 'building llama-server', pool_id: 'cpu0', percent: 40 })))
      .toBe('[pool-managerd] building llama-server  (pool_id=cpu0 percent=40)');
  });
  it('drops debug and access lines and flags errors', () => {
    expect(humanLogLine('x', JSON.stringify({ level: 20, msg: 'noise' }))).toBeUndefined();
    expect(humanLogLine('x', JSON.stringify({ level: 30, msg: 'request completed', reqId: 'r1' }))).toBeUndefined();
    expect(humanLogLine('x', JSON.stringify({ level: 50, msg: 'boom' }))).toBe('[x] ERROR boom');
  });
});

// A fixture orchestratord: just enough of POST /v2/tasks and the SSE stream to drive the client.
const servers: FixtureOrchestrator[] = [];
afterEach(async () => { await Promise.all(servers.splice(0).map((s) => s.close())); });

async function fixture(frames: string[], opts: { token?: string } = {}): Promise<FixtureOrchestrator> {
  const f = await fixtureOrchestrator(frames, opts);
  servers.push(f);
  return f;
}

function sink(): { stream: PassThrough; text: () => string } {
  const stream = new PassThrough();
  let text = '';
  stream.on('data', (c: Buffer) => { text += c.toString(); });
  return { stream, text: () => text };
}

const opts = (out: PassThrough, err: PassThrough) => ({ text: 'hi', model: 'synthetic:llama', maxTokens: 4, seed: 1, priority: 'interactive' as const, deadlineMs: 1000, out, err });

describe('submit', () => {
  it('prints streamed text and returns the engine token count', async () => {
    const { url, seen } = await fixture([
      formatSseFrame(1, { event: 'started', data: { queue_position: 0, predicted_start_ms: 5 } }),
      formatSseFrame(2, { event: 'token', data: { t: 'Hello', i: 0 } }),
      formatSseFrame(3, { event: 'token', data: { t: ' world', i: 1 } }),
      formatSseFrame(4, { event: 'end', data: { tokens_out: 3, decode_ms: 1.5, decode_time_ms: 1.5, pool_id: 'cpu0', node_id: 'n1', engine_version: 'b1' } }),
    ], { token: 'secret-token-0123456789' });
    const out = sink();
    const err = sink();
    const target: Target = { url, token: 'secret-token-0123456789' };
    await expect(submit(target, opts(out.stream, err.stream))).resolves.toBe(3);
    expect(out.text()).toBe('Hello world\n');
    expect(err.text()).toContain('3 tokens');
    expect(seen.every((l) => l.endsWith('auth=Bearer secret-token-0123456789'))).toBe(true);
  });

  it('turns an error frame and an error envelope into CliErrors', async () => {
    const { url } = await fixture([
      formatSseFrame(1, { event: 'started', data: { queue_position: 0, predicted_start_ms: 5 } }),
      formatSseFrame(2, { event: 'error', data: { code: 'WORKER_RESET', message: 'engine died', retriable: true } }),
    ], { token: 'secret-token-0123456789' });
    const out = sink();
    await expect(submit({ url, token: 'secret-token-0123456789' }, opts(out.stream, sink().stream))).rejects.toThrow('WORKER_RESET: engine died');
    await expect(submit({ url, token: 'wrong-token-000000000' }, opts(out.stream, sink().stream))).rejects.toBeInstanceOf(CliError);
  });

  it('fails when the stream closes without a terminal frame', async () => {
    const { url } = await fixture([formatSseFrame(1, { event: 'token', data: { t: 'x', i: 0 } })]);
    await expect(submit({ url, token: undefined }, opts(sink().stream, sink().stream))).rejects.toThrow('stream closed before a terminal event');
  });
});
