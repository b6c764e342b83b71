import { PassThrough } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { formatSseFrame } from '@llama-orch/contracts';
import {
  CliError,
  InterruptedError,
  PLAIN,
  dashboardUrl,
  humanLogLine,
  listeningUrl,
  metricTotal,
  paintFor,
  queueDepth,
  renderTable,
  submit,
  type Target,
} from './index.js';
import { fixtureOrchestrator, type FixtureOptions, type FixtureOrchestrator } from './testing/fixture-orchestrator.js';

describe('metricTotal', () => {
  it('sums every label set of a metric', () => {
    const text =
      '# TYPE queue_depth gauge\nqueue_depth{priority="interactive"} 2\nqueue_depth{priority="batch"} 3\nqueue_depth_other 9\n';
    expect(metricTotal(text, 'queue_depth')).toBe('5');
    expect(metricTotal(text, 'missing')).toBe('?');
  });
  it('finds the queue depth under its old or prefixed name', () => {
    expect(
      queueDepth('# TYPE queue_depth gauge\nqueue_depth{priority="interactive"} 2\nqueue_depth{priority="batch"} 3\n'),
    ).toBe(5);
    expect(queueDepth('llorch_queue_depth{priority="batch"} 4\n')).toBe(4);
    expect(queueDepth('llorch_active_leases 1\n')).toBeNull();
  });
});

describe('paintFor', () => {
  it('colours only a TTY, and never with NO_COLOR set', () => {
    expect(paintFor({ isTTY: true }, {}).red('x')).toBe('\u001b[31mx\u001b[39m');
    expect(paintFor({ isTTY: true }, { NO_COLOR: '1' }).red('x')).toBe('x');
    expect(paintFor({ isTTY: true }, { NO_COLOR: '' }).enabled).toBe(true);
    expect(paintFor({ isTTY: false }, {}).green('x')).toBe('x');
    expect(paintFor({}, {}).enabled).toBe(false);
    expect(PLAIN.yellow('y')).toBe('y');
  });
  it('keeps table columns aligned when a state cell is coloured', () => {
    const paint = paintFor({ isTTY: true }, {});
    const styled = renderTable(
      [
        ['POOL', 'STATE', 'X'],
        ['p1', 'ready', '1'],
        ['p2', 'failed', '2'],
      ],
      (c, col, row) => (col === 1 && row > 0 ? paint.red(c) : c),
    );
    expect(styled.replace(/\u001b\[\d+m/g, '')).toBe(
      renderTable([
        ['POOL', 'STATE', 'X'],
        ['p1', 'ready', '1'],
        ['p2', 'failed', '2'],
      ]),
    );
    expect(styled).toContain('\u001b[31mready \u001b[39m');
  });
});

describe('renderTable', () => {
  it('aligns columns under a header rule', () => {
    expect(
      renderTable([
        ['POOL', 'READY'],
        ['cpu0', 'yes'],
        ['gpu-long-name', 'no'],
      ]),
    ).toBe('POOL           READY\n-------------  -----\ncpu0           yes\ngpu-long-name  no');
  });
});

describe('humanLogLine', () => {
  it('prefers the human narration and keeps key facts', () => {
    expect(
      humanLogLine(
        'pool-managerd',
        JSON.stringify({ level: 30, msg: 'build', human: 'building llama-server', pool_id: 'cpu0', percent: 40 }),
      ),
    ).toBe('[pool-managerd] building llama-server  (pool_id=cpu0 percent=40)');
  });
  it('drops debug and access lines and flags errors', () => {
    expect(humanLogLine('x', JSON.stringify({ level: 20, msg: 'noise' }))).toBeUndefined();
    expect(humanLogLine('x', JSON.stringify({ level: 30, msg: 'request completed', reqId: 'r1' }))).toBeUndefined();
    expect(humanLogLine('x', JSON.stringify({ level: 50, msg: 'boom' }))).toBe('[x] ERROR boom');
  });
});

describe('the dashboard URL llorch up prints', () => {
  it("comes from orchestratord's listening line (the real port, also for port 0)", () => {
    expect(
      listeningUrl(JSON.stringify({ level: 30, msg: 'listening', url: 'http://127.0.0.1:41234', addr: '127.0.0.1:0' })),
    ).toBe('http://127.0.0.1:41234');
    expect(listeningUrl(JSON.stringify({ level: 30, msg: 'fastify listening at http://127.0.0.1:1' }))).toBeUndefined();
    expect(listeningUrl(JSON.stringify({ level: 30, msg: 'pool ready', state: 'listening' }))).toBeUndefined();
    expect(listeningUrl('not json "listening"')).toBeUndefined();
  });
  it('is the root of that URL, with a wildcard bind shown as localhost', () => {
    expect(dashboardUrl('http://127.0.0.1:8080')).toBe('http://127.0.0.1:8080/');
    expect(dashboardUrl('http://0.0.0.0:8080')).toBe('http://localhost:8080/');
    expect(dashboardUrl('http://[::]:8080')).toBe('http://localhost:8080/');
    expect(dashboardUrl('http://gpu-gw.internal:9000')).toBe('http://gpu-gw.internal:9000/');
  });
});

// A fixture orchestratord: just enough of POST /v2/tasks and the SSE stream to drive the client.
const servers: FixtureOrchestrator[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

async function fixture(frames: string[], opts: FixtureOptions = {}): Promise<FixtureOrchestrator> {
  const f = await fixtureOrchestrator(frames, opts);
  servers.push(f);
  return f;
}

function sink(): { stream: PassThrough; text: () => string } {
  const stream = new PassThrough();
  let text = '';
  stream.on('data', (c: Buffer) => {
    text += c.toString();
  });
  return { stream, text: () => text };
}

const opts = (out: PassThrough, err: PassThrough) => ({
  text: 'hi',
  model: 'synthetic:llama',
  maxTokens: 4,
  seed: 1,
  priority: 'interactive' as const,
  deadlineMs: 1000,
  out,
  err,
});

describe('submit', () => {
  it('on abort, cancels the task, shows the canceled end and says interrupted', async () => {
    const f = await fixture(
      [
        formatSseFrame(1, { event: 'started', data: { queue_position: 0, predicted_start_ms: 5 } }),
        formatSseFrame(2, { event: 'token', data: { t: 'Hel', i: 0 } }),
      ],
      { holdOpen: true },
    );
    const out = sink();
    const ac = new AbortController();
    out.stream.on('data', () => ac.abort());
    const result = await submit(
      { url: f.url, token: undefined },
      { ...opts(out.stream, sink().stream), signal: ac.signal },
    );
    expect(result).toMatchObject({ text: 'Hel', canceled: true, interrupted: true });
    expect(f.seen.map((l) => l.split(' auth=')[0])).toContain(
      'POST /v2/tasks/00000000-0000-4000-8000-000000000001/cancel',
    );
  });

  it('on abort with a stream that never ends, gives up after the grace period with an InterruptedError', async () => {
    const f = await fixture([formatSseFrame(1, { event: 'token', data: { t: 'x', i: 0 } })], {
      holdOpen: true,
      routes: {
        'POST /v2/tasks/00000000-0000-4000-8000-000000000001/cancel': {
          status: 404,
          body: { code: 'NOT_FOUND', message: 'gone' },
        },
      },
    });
    const ac = new AbortController();
    const out = sink();
    out.stream.on('data', () => ac.abort());
    const t0 = Date.now();
    const err = await submit(
      { url: f.url, token: undefined },
      { ...opts(out.stream, sink().stream), signal: ac.signal },
    ).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InterruptedError);
    expect((err as InterruptedError).exitCode).toBe(130);
    expect((err as Error).message).toMatch(/cancelling task .* failed: NOT_FOUND: gone/);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(2900);
  });

  it('prints streamed text and returns the engine token count', async () => {
    const { url, seen } = await fixture(
      [
        formatSseFrame(1, { event: 'started', data: { queue_position: 0, predicted_start_ms: 5 } }),
        formatSseFrame(2, { event: 'token', data: { t: 'Hello', i: 0 } }),
        formatSseFrame(3, { event: 'token', data: { t: ' world', i: 1 } }),
        formatSseFrame(4, {
          event: 'end',
          data: {
            tokens_out: 3,
            decode_ms: 1.5,
            decode_time_ms: 1.5,
            pool_id: 'cpu0',
            node_id: 'n1',
            engine_version: 'b1',
          },
        }),
      ],
      { token: 'secret-token-0123456789' },
    );
    const out = sink();
    const err = sink();
    const target: Target = { url, token: 'secret-token-0123456789' };
    await expect(submit(target, opts(out.stream, err.stream))).resolves.toEqual({
      task_id: '00000000-0000-4000-8000-000000000001',
      text: 'Hello world',
      tokens_out: 3,
      canceled: false,
      interrupted: false,
      decode_ms: 1.5,
      pool_id: 'cpu0',
      node_id: 'n1',
      engine_version: 'b1',
    });
    expect(out.text()).toBe('Hello world\n');
    expect(err.text()).toContain('3 tokens');
    expect(seen.every((l) => l.endsWith('auth=Bearer secret-token-0123456789'))).toBe(true);
  });

  it('turns an error frame and an error envelope into CliErrors', async () => {
    const { url } = await fixture(
      [
        formatSseFrame(1, { event: 'started', data: { queue_position: 0, predicted_start_ms: 5 } }),
        formatSseFrame(2, { event: 'error', data: { code: 'WORKER_RESET', message: 'engine died', retriable: true } }),
      ],
      { token: 'secret-token-0123456789' },
    );
    const out = sink();
    await expect(submit({ url, token: 'secret-token-0123456789' }, opts(out.stream, sink().stream))).rejects.toThrow(
      'WORKER_RESET: engine died',
    );
    await expect(
      submit({ url, token: 'wrong-token-000000000' }, opts(out.stream, sink().stream)),
    ).rejects.toBeInstanceOf(CliError);
  });

  it('fails when the stream closes without a terminal frame', async () => {
    const { url } = await fixture([formatSseFrame(1, { event: 'token', data: { t: 'x', i: 0 } })]);
    await expect(submit({ url, token: undefined }, opts(sink().stream, sink().stream))).rejects.toThrow(
      'stream closed before a terminal event',
    );
  });
});
