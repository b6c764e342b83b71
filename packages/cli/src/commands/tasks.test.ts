import { afterEach, describe, expect, it } from 'vitest';
import { TaskInfoSchema, type TaskInfo } from '@llama-orch/contracts';
import { paintFor } from '../color.js';
import { fixtureOrchestrator, type FixtureOrchestrator } from '../testing/fixture-orchestrator.js';
import { formatMs, getTask, listTasks, outcomeText, renderTask, renderTasks } from './tasks.js';

const NOW = Date.parse('2026-01-01T00:10:00.000Z');
const T0 = Date.parse('2026-01-01T00:00:00.000Z');

function task(over: Partial<TaskInfo> = {}): TaskInfo {
  return TaskInfoSchema.parse({
    task_id: '00000000-0000-4000-8000-000000000001',
    state: 'ended',
    model: 'synthetic',
    model_ref: 'synthetic:llama',
    priority: 'interactive',
    workload: 'chat',
    door: 'v2',
    correlation_id: 'c-1',
    admitted_at: T0,
    pool_id: 'p1',
    node_id: 'n1',
    attempts: 1,
    outcome: { result: 'completed', stop_type: 'eos', finish_reason: 'stop' },
    usage: { tokens_in: 12, tokens_out: 48, cached_tokens: 4 },
    timings: {
      queued_ms: 3,
      first_token_ms: 120.4,
      total_ms: 1350,
      dispatched_at: T0 + 3,
      first_token_at: T0 + 120,
      ended_at: T0 + 1350,
    },
    ...over,
  });
}
const QUEUED = task({
  task_id: 'q-1',
  state: 'queued',
  model: 'qwen',
  model_ref: 'hf:org/repo/qwen.gguf',
  priority: 'batch',
  admitted_at: NOW - 2500,
  queue_position: 3,
  predicted_start_ms: 1800,
  pool_id: undefined,
  node_id: undefined,
  attempts: 0,
  outcome: undefined,
  usage: { tokens_out: 0 },
  timings: {},
});
const RUNNING = task({
  task_id: 'r-1',
  state: 'running',
  admitted_at: NOW - 65_000,
  outcome: undefined,
  usage: { tokens_out: 7 },
  timings: { queued_ms: 2, first_token_ms: 80, dispatched_at: NOW - 64_998, first_token_at: NOW - 64_920 },
});
const FAILED = task({
  task_id: 'e-1',
  admitted_at: T0 - 3 * 3_600_000,
  outcome: { result: 'error', error: { code: 'WORKER_RESET', message: 'engine died' } },
  usage: { tokens_out: 2 },
});

describe('formatMs', () => {
  it('reads as an operator would: ms, seconds, minutes, hours, days', () => {
    expect(
      [0, 340.6, 999, 1000, 1234, 59_949, 60_000, 185_000, 3_600_000, 7_860_000, 90_000_000].map(formatMs),
    ).toEqual(['0 ms', '341 ms', '999 ms', '1.0 s', '1.2 s', '59.9 s', '1m00s', '3m05s', '1h00m', '2h11m', '1d01h']);
    expect(formatMs(undefined)).toBe('-');
    expect(formatMs(-5)).toBe('0 ms');
  });
});

describe('renderTasks', () => {
  it('one row per task: id, state, model, priority, node/pool, tokens out, TTFT, age and outcome', () => {
    const lines = renderTasks([QUEUED, RUNNING, task(), FAILED], undefined, NOW).split('\n');
    const cells = lines.map((l) => l.trim().split(/\s{2,}/));
    expect(cells[0]).toEqual(['TASK', 'STATE', 'MODEL', 'PRIORITY', 'POOL', 'TOKENS OUT', 'TTFT', 'AGE', 'OUTCOME']);
    expect(lines[1]).toMatch(/^-+ {2}-+/);
    expect(cells[2]).toEqual(['q-1', 'queued', 'qwen', 'batch', '-', '0', '-', '2.5 s', 'queued, 3 ahead']);
    expect(cells[3]).toEqual(['r-1', 'running', 'synthetic', 'interactive', 'n1/p1', '7', '80 ms', '1m05s', '-']);
    expect(cells[4]).toEqual([
      '00000000-0000-4000-8000-000000000001',
      'ended',
      'synthetic',
      'interactive',
      'n1/p1',
      '48',
      '120 ms',
      '10m00s',
      'completed (eos)',
    ]);
    expect(cells[5]).toEqual([
      'e-1',
      'ended',
      'synthetic',
      'interactive',
      'n1/p1',
      '2',
      '120 ms',
      '3h10m',
      'error: WORKER_RESET',
    ]);
    expect(renderTasks([], undefined, NOW)).toBe('no tasks');
  });

  it('colours the state and a failed outcome on a terminal, the columns still aligned', () => {
    const paint = paintFor({ isTTY: true }, {});
    const coloured = renderTasks([RUNNING, FAILED], paint, NOW);
    expect(coloured).toContain('\u001b[32mrunning');
    expect(coloured).toContain('\u001b[31merror: WORKER_RESET');
    expect(coloured.replace(/\u001b\[\d+m/g, '')).toBe(renderTasks([RUNNING, FAILED], undefined, NOW));
  });

  it('words every outcome', () => {
    expect(outcomeText(task({ outcome: { result: 'canceled', stop_type: 'cancel' } }))).toBe('canceled');
    expect(outcomeText(task({ outcome: { result: 'completed', finish_reason: 'length' } }))).toBe('completed (length)');
    expect(outcomeText(task({ outcome: { result: 'completed' } }))).toBe('completed');
    expect(outcomeText(task({ outcome: { result: 'error' } }))).toBe('error');
  });
});

describe('renderTask', () => {
  it('an ended task: one fact a line, labels aligned', () => {
    expect(renderTask(task(), NOW)).toBe(
      [
        'task         00000000-0000-4000-8000-000000000001',
        'state        ended',
        'model        synthetic (synthetic:llama)',
        'priority     interactive',
        'workload     chat via v2',
        'correlation  c-1',
        'admitted     2026-01-01T00:00:00.000Z (10m00s ago)',
        'pool         n1/p1 (attempts 1)',
        'outcome      completed, stop eos, finish reason stop',
        'usage        12 tokens in, 4 cached, 48 tokens out',
        'timings      queued 3 ms, first token 120 ms, total 1.4 s',
        'dispatched   2026-01-01T00:00:00.003Z (9m59s ago)',
        'first token  2026-01-01T00:00:00.120Z (9m59s ago)',
        'ended        2026-01-01T00:00:01.350Z (9m58s ago)',
      ].join('\n'),
    );
  });

  it('a queued task shows its place and predicted start; an error its code and message', () => {
    const queued = renderTask(QUEUED, NOW);
    expect(queued).toMatch(/^queue {8}3 ahead, predicted start 1\.8 s$/m);
    expect(queued).toMatch(/^model {8}qwen \(hf:org\/repo\/qwen\.gguf\)$/m);
    expect(queued).not.toMatch(/^(pool|outcome|timings|ended) /m);
    expect(queued).toMatch(/^usage {8}0 tokens out$/m);
    expect(renderTask(FAILED, NOW)).toMatch(/^outcome +error, WORKER_RESET: engine died$/m);
    expect(renderTask(task({ model: 'synthetic:llama' }), NOW)).toMatch(/^model +synthetic:llama$/m);
  });
});

describe('listTasks and getTask against an HTTP fixture', () => {
  const servers: FixtureOrchestrator[] = [];
  afterEach(async () => {
    await Promise.all(servers.splice(0).map((s) => s.close()));
  });

  it('sends the filters, follows next_cursor (short and empty pages too) until the limit, asking only for what is missing', async () => {
    const ids = (from: number, n: number) => Array.from({ length: n }, (_, i) => task({ task_id: `t-${from + i}` }));
    const f = await fixtureOrchestrator([], {
      routes: {
        'GET /v2/tasks?state=ended&model=synthetic&priority=batch&since=1000&limit=5': {
          status: 200,
          body: { tasks: ids(0, 2), next_cursor: 'c1' },
        },
        'GET /v2/tasks?state=ended&model=synthetic&priority=batch&since=1000&limit=3&cursor=c1': {
          status: 200,
          body: { tasks: [], next_cursor: 'c2' },
        },
        'GET /v2/tasks?state=ended&model=synthetic&priority=batch&since=1000&limit=3&cursor=c2': {
          status: 200,
          body: { tasks: ids(2, 3), next_cursor: 'c3' },
        },
      },
    });
    servers.push(f);
    const list = await listTasks(
      { url: f.url, token: 'k' },
      { state: 'ended', model: 'synthetic', priority: 'batch', since: 1000 },
      5,
    );
    expect(list.tasks.map((t) => t.task_id)).toEqual(['t-0', 't-1', 't-2', 't-3', 't-4']);
    expect(list.next_cursor).toBe('c3');
    expect(f.seen).toHaveLength(3);
    expect(f.seen.every((l) => l.endsWith('auth=Bearer k'))).toBe(true);
  });

  it('stops at the last page, and at a cursor that comes back; pages are at most 500', async () => {
    // 520 wanted: a page of 500 (the most orchestratord serves), then the 20 still missing
    const first = Array.from({ length: 500 }, (_, i) => task({ task_id: `a-${i}` }));
    const f = await fixtureOrchestrator([], {
      routes: {
        'GET /v2/tasks?limit=500': { status: 200, body: { tasks: first, next_cursor: 'x' } },
        'GET /v2/tasks?limit=20&cursor=x': { status: 200, body: { tasks: [task({ task_id: 'b' })], next_cursor: 'x' } },
        'GET /v2/tasks?limit=50': { status: 200, body: { tasks: [task({ task_id: 'only' })] } },
      },
    });
    servers.push(f);
    const target = { url: f.url, token: undefined };
    const looped = await listTasks(target, {}, 520);
    expect(looped.tasks).toHaveLength(501);
    expect(looped.tasks.at(-1)?.task_id).toBe('b');
    expect(await listTasks(target, {}, 50)).toEqual({ tasks: [task({ task_id: 'only' })] });
    expect(f.seen).toHaveLength(3);
  });

  it('a task by id (escaped in the path); NOT_FOUND and a malformed answer are CliErrors', async () => {
    const f = await fixtureOrchestrator([], {
      routes: {
        'GET /v2/tasks/a%2Fb': { status: 200, body: task({ task_id: 'a/b' }) },
        'GET /v2/tasks/gone': { status: 404, body: { code: 'NOT_FOUND', message: "task 'gone' not found" } },
        'GET /v2/tasks/odd': { status: 200, body: { task_id: 'odd' } },
      },
    });
    servers.push(f);
    const target = { url: f.url, token: undefined };
    expect((await getTask(target, 'a/b')).task_id).toBe('a/b');
    await expect(getTask(target, 'gone')).rejects.toThrow("NOT_FOUND: task 'gone' not found");
    await expect(getTask(target, 'odd')).rejects.toThrow(/^GET \/v2\/tasks\/odd: unexpected answer/);
  });
});
