import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { TaskInfo } from '@llama-orch/contracts';
import { afterEach, describe, expect, it } from 'vitest';
import { ApiClient, ForbiddenError, UnauthorizedError } from './api.js';
import { formatClock } from './format.js';
import { KeyStore } from './key-store.js';
import { MalformedTaskError, describeOutcome, fetchTask, taskFacts } from './task-record.js';

const T0 = Date.parse('2026-11-25T16:00:00.000Z');
const ENDED: TaskInfo = {
  task_id: '7f3c2a10-0000-4000-8000-000000000001',
  state: 'ended',
  model: 'synthetic',
  model_ref: 'synthetic:llama',
  priority: 'interactive',
  workload: 'chat',
  door: 'chat',
  correlation_id: 'req-42',
  admitted_at: T0,
  pool_id: 'p1',
  node_id: 'n1',
  attempts: 1,
  outcome: { result: 'completed', stop_type: 'eos', finish_reason: 'stop' },
  usage: { tokens_in: 12, tokens_out: 48, cached_tokens: 4 },
  timings: { queued_ms: 3, first_token_ms: 120, total_ms: 1350, ended_at: T0 + 1350 },
};

// A loopback server plays GET /v2/tasks/{id}: what the page sends and how it reads each answer.
let server: Server | undefined;
afterEach(async () => {
  const s = server;
  server = undefined;
  if (s)
    await new Promise((r) => {
      s.closeAllConnections();
      s.close(r);
    });
});

async function serve(answer: (req: IncomingMessage) => { status: number; body: unknown }): Promise<{
  api: ApiClient;
  seen: IncomingMessage[];
}> {
  const seen: IncomingMessage[] = [];
  server = createServer((req, res) => {
    seen.push(req);
    const { status, body } = answer(req);
    res
      .writeHead(status, { 'content-type': 'application/json' })
      .end(typeof body === 'string' ? body : JSON.stringify(body));
  });
  await new Promise<void>((r) => server!.listen(0, '127.0.0.1', r));
  const keys = new KeyStore(undefined);
  keys.set('sk-operator');
  return { api: new ApiClient({ keys, baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}` }), seen };
}

describe('fetchTask', () => {
  it("GETs the task's record with the page's key (the id escaped) and returns it", async () => {
    const { api, seen } = await serve(() => ({ status: 200, body: ENDED }));
    await expect(fetchTask(api, 'a/b c')).resolves.toEqual({ kind: 'found', task: ENDED });
    expect(seen[0]!.method).toBe('GET');
    expect(seen[0]!.url).toBe('/v2/tasks/a%2Fb%20c');
    expect(seen[0]!.headers.authorization).toBe('Bearer sk-operator');
  });

  it('a 404 (expired, never existed, another key’s) is `gone`, not an error', async () => {
    const { api } = await serve(() => ({ status: 404, body: { code: 'NOT_FOUND', message: 'task not found' } }));
    await expect(fetchTask(api, 'old')).resolves.toEqual({ kind: 'gone' });
  });

  it('401 and 403 throw the typed errors (a 401 is announced, so the key form shows); a body that is no record is malformed', async () => {
    let status = 401;
    const { api } = await serve(() =>
      status === 200
        ? { status, body: { task_id: 'x', state: 'done' } }
        : { status, body: { code: status === 401 ? 'UNAUTHORIZED' : 'FORBIDDEN', message: 'no' } },
    );
    const announced: string[] = [];
    api.onUnauthorized((e) => announced.push(e.message));
    await expect(fetchTask(api, 't')).rejects.toBeInstanceOf(UnauthorizedError);
    expect(announced).toEqual(['no']);
    status = 403;
    await expect(fetchTask(api, 't')).rejects.toBeInstanceOf(ForbiddenError);
    status = 200;
    await expect(fetchTask(api, 't')).rejects.toBeInstanceOf(MalformedTaskError);
  });

  it('an aborted lookup rejects (the dialog closed first)', async () => {
    const { api } = await serve(() => ({ status: 200, body: ENDED }));
    const ac = new AbortController();
    ac.abort();
    await expect(fetchTask(api, 't', ac.signal)).rejects.toThrow();
  });
});

describe('taskFacts', () => {
  it('an ended task: state, model and its ref, priority, workload and door, node / pool, outcome, usage, timings, times, correlation id', () => {
    expect(taskFacts(ENDED)).toEqual([
      { key: 'state', label: 'State', value: 'ended' },
      { key: 'model', label: 'Model', value: 'synthetic (synthetic:llama)' },
      { key: 'priority', label: 'Priority', value: 'interactive' },
      { key: 'workload', label: 'Workload', value: 'chat via chat' },
      { key: 'placement', label: 'Node / pool', value: 'n1 / p1 (1 attempt)' },
      { key: 'outcome', label: 'Outcome', value: 'completed (eos, finish reason stop)' },
      { key: 'usage', label: 'Usage', value: '12 prompt tokens (4 cached), 48 generated' },
      { key: 'timings', label: 'Timings', value: 'queued 3 ms, first token 120 ms, total 1.4 s' },
      { key: 'admitted', label: 'Admitted', value: formatClock(T0) },
      { key: 'ended', label: 'Ended', value: formatClock(T0 + 1350) },
      { key: 'correlation', label: 'Correlation id', value: 'req-42' },
    ]);
  });

  it('a queued task: its place and predicted start, no placement, outcome or end yet', () => {
    const queued: TaskInfo = {
      ...ENDED,
      state: 'queued',
      model: 'synthetic:llama',
      queue_position: 2,
      predicted_start_ms: 1800,
      pool_id: undefined,
      node_id: undefined,
      attempts: 0,
      outcome: undefined,
      usage: { tokens_out: 0 },
      timings: {},
    };
    const facts = Object.fromEntries(taskFacts(queued).map((f) => [f.key, f.value]));
    expect(facts).toEqual({
      state: 'queued (2 ahead, first token predicted in 1.8 s)',
      model: 'synthetic:llama',
      priority: 'interactive',
      workload: 'chat via chat',
      outcome: 'not ended yet',
      usage: '0 generated',
      admitted: formatClock(T0),
      correlation: 'req-42',
    });
  });

  it('words every outcome; a re-placed task counts its attempts', () => {
    expect(describeOutcome({ ...ENDED, outcome: { result: 'canceled' } })).toBe('canceled');
    expect(describeOutcome({ ...ENDED, outcome: { result: 'completed' } })).toBe('completed');
    expect(
      describeOutcome({
        ...ENDED,
        outcome: { result: 'error', error: { code: 'WORKER_RESET', message: 'engine died' } },
      }),
    ).toBe('error: WORKER_RESET — engine died');
    expect(describeOutcome({ ...ENDED, outcome: { result: 'error' } })).toBe('error');
    expect(taskFacts({ ...ENDED, attempts: 2 }).find((f) => f.key === 'placement')?.value).toBe('n1 / p1 (2 attempts)');
  });
});
