import {
  ErrorEnvelopeSchema,
  OrchestratorConfigSchema,
  TaskInfoSchema,
  TaskListSchema,
  type TaskInfo,
} from '@llama-orch/contracts';
import { request } from 'undici';
import { describe, expect, it } from 'vitest';
import { FixturePoolManager } from '@llama-orch/fixture-pool-manager';
import {
  annAuth,
  CAT,
  CLUSTER_HEARTBEAT_MS,
  DAN,
  KEYS,
  NODE,
  replicaHarness,
  until,
  type ReplicaHarness,
} from '../testing/replica-harness.js';
import { captureLogger, taskBody } from '../testing/test-helpers.js';
import { buildApp, type OrchdApp } from '../app.js';
import { createUpstreamDispatchers } from '../upstream/dispatchers.js';
import { loadCredentials } from './credentials.js';

// GET /v2/tasks/{id} and GET /v2/tasks (.specs/60-orchestratord.md, Task records), on both stores:
// one process (the in-process record store), and two replicas on Redis (admitted on one, read on
// the other). A FIXTURE node serves: one one-slot pool, tokens every `tokenIntervalMs`.
const catAuth = { authorization: `Bearer ${CAT}` };
const danAuth = { authorization: `Bearer ${DAN}` };

interface Fleet {
  /** Where tasks are admitted. */
  readonly admitUrl: string;
  /** Where they are read (the other replica with Redis; the same process in memory). */
  readonly readUrl: string;
}

let clusters = 0;

async function fleet(
  h: ReplicaHarness,
  store: 'memory' | 'redis',
  over: Record<string, unknown> = {},
  tokenIntervalMs = 5,
): Promise<Fleet> {
  clusters += 1;
  const settings = { heartbeat_interval_ms: CLUSTER_HEARTBEAT_MS, ...over };
  const apps =
    store === 'redis'
      ? (await Promise.all([0, 1].map(() => h.replica(`records${clusters}:`, settings)))).map((r) => r.app)
      : [await oneProcess(h, settings)];
  const n = apps.length;
  const urls: string[] = [];
  for (const app of apps) urls.push(await app.listen({ port: 0, host: '127.0.0.1' }));
  const node = await FixturePoolManager.start({
    nodeId: 'n1',
    pools: [{ pool_id: 'p', models: ['m'], slots: 1 }],
    token: NODE,
    tokenIntervalMs,
  });
  h.defer(() => node.close());
  expect(await node.register(urls[0]!)).toBe(200);
  await node.startHeartbeats(urls[n - 1]!, CLUSTER_HEARTBEAT_MS);
  h.defer(() => Promise.resolve(node.stopHeartbeats()));
  await until(
    () => apps.every((a) => a.services.registry.poolsForModel('m')[0]?.node_state === 'online'),
    'every replica to see n1 online',
  );
  return { admitUrl: urls[0]!, readUrl: urls[n - 1]! };
}

/** One orchestratord on the in-process store, with the harness's keys. */
async function oneProcess(h: ReplicaHarness, over: Record<string, unknown>): Promise<OrchdApp> {
  const config = OrchestratorConfigSchema.parse({ keys_file: '/k.yaml', node_token: NODE, ...over });
  const credentials = loadCredentials({ config, env: {}, readFile: () => KEYS });
  const upstream = createUpstreamDispatchers();
  const app = await buildApp(
    { logger: captureLogger().logger, upstream: upstream.http1, upstreamH2c: upstream.h2c, credentials },
    config,
  );
  h.defer(() => upstream.close());
  h.defer(() => app.close());
  return app;
}

async function admit(f: Fleet, auth: Record<string, string>, over = {}): Promise<string> {
  const task = taskBody(over);
  const res = await request(`${f.admitUrl}/v2/tasks`, {
    method: 'POST',
    headers: { ...auth, 'content-type': 'application/json' },
    body: JSON.stringify(task),
  });
  expect(res.statusCode).toBe(202);
  await res.body.dump();
  return String(task.task_id);
}

async function get(url: string, path: string, auth: Record<string, string>) {
  const res = await request(`${url}${path}`, { headers: auth });
  return { status: res.statusCode, body: (await res.body.json()) as unknown };
}

async function info(f: Fleet, id: string, auth = annAuth): Promise<TaskInfo> {
  const res = await get(f.readUrl, `/v2/tasks/${id}`, auth);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return TaskInfoSchema.parse(res.body);
}

async function ended(f: Fleet, id: string, auth = annAuth): Promise<TaskInfo> {
  let last: TaskInfo | undefined;
  await until(async () => (last = await info(f, id, auth)).state === 'ended', `task ${id} to end`, 15_000);
  return last!;
}

describe.each(['memory', 'redis'] as const)('task records (%s store)', (store) => {
  const h = replicaHarness();

  it('shows a task queued with its position, running on its pool, then ended with its outcome, usage and timings', async () => {
    // tokens every 40 ms: the first task holds the one slot for ~1 s
    const f = await fleet(h, store, {}, 40);
    const first = await admit(f, catAuth, { max_tokens: 25 });
    const second = await admit(f, catAuth, { max_tokens: 3, priority: 'batch' });

    const queued = await info(f, second, catAuth);
    expect(queued).toMatchObject({ task_id: second, state: 'queued', model: 'm', priority: 'batch', door: 'v2' });
    expect(queued.queue_position).toBeGreaterThanOrEqual(0);
    expect(queued.predicted_start_ms).toBeGreaterThanOrEqual(0);
    expect(queued.pool_id).toBeUndefined();

    const running = await info(f, first, catAuth);
    expect(running).toMatchObject({ state: 'running', pool_id: 'p', node_id: 'n1', attempts: 1 });
    expect(running.timings.dispatched_at).toBeGreaterThanOrEqual(running.admitted_at);

    const done = await ended(f, second, catAuth);
    expect(done).toMatchObject({
      state: 'ended',
      pool_id: 'p',
      node_id: 'n1',
      outcome: { result: 'completed' },
      usage: { tokens_out: 3 },
    });
    expect(done.queue_position).toBeUndefined();
    expect(done.timings.first_token_ms).toBeGreaterThan(0);
    expect(done.timings.total_ms).toBeGreaterThanOrEqual(done.timings.first_token_ms!);
    expect(done.timings.queued_ms).toBeGreaterThan(0);
    expect(done.correlation_id.length).toBeGreaterThan(0);
    const firstDone = await ended(f, first, catAuth);
    expect(firstDone.usage.tokens_out).toBe(25);
  });

  it('a canceled task ends canceled; an unknown id is a typed 404', async () => {
    const f = await fleet(h, store, {}, 40);
    const id = await admit(f, catAuth, { max_tokens: 200 });
    await until(async () => (await info(f, id, catAuth)).state === 'running', 'the task to run');
    const cancel = await request(`${f.readUrl}/v2/tasks/${id}/cancel`, { method: 'POST', headers: catAuth });
    expect(cancel.statusCode).toBe(204);
    await cancel.body.dump();
    expect((await ended(f, id, catAuth)).outcome).toMatchObject({ result: 'canceled' });

    const unknown = await get(f.readUrl, '/v2/tasks/3f1e4c7a-0000-4000-8000-000000000000', catAuth);
    expect(unknown.status).toBe(404);
    expect(ErrorEnvelopeSchema.parse(unknown.body).code).toBe('NOT_FOUND');
  });

  it('a task is visible only to the key that admitted it and to operator keys: another key gets the 404 of an unknown id', async () => {
    const f = await fleet(h, store);
    const id = await admit(f, catAuth);
    await ended(f, id, catAuth);
    const unknown = await get(f.readUrl, '/v2/tasks/3f1e4c7a-0000-4000-8000-000000000000', danAuth);

    const asDan = await get(f.readUrl, `/v2/tasks/${id}`, danAuth);
    expect(asDan.status).toBe(404);
    // the same answer as an unknown id, but for the id itself: no existence oracle
    expect(ErrorEnvelopeSchema.parse(asDan.body).code).toBe(ErrorEnvelopeSchema.parse(unknown.body).code);
    const events = await request(`${f.readUrl}/v2/tasks/${id}/events`, { headers: danAuth });
    expect(events.statusCode).toBe(404);
    await events.body.dump();
    const cancel = await request(`${f.readUrl}/v2/tasks/${id}/cancel`, { method: 'POST', headers: danAuth });
    expect(cancel.statusCode).toBe(404);
    await cancel.body.dump();

    const danList = TaskListSchema.parse((await get(f.readUrl, '/v2/tasks', danAuth)).body);
    expect(danList.tasks.map((t) => t.task_id)).not.toContain(id);
    const catList = TaskListSchema.parse((await get(f.readUrl, '/v2/tasks', catAuth)).body);
    expect(catList.tasks.map((t) => t.task_id)).toEqual([id]);
    // the operator key reads it and lists it
    expect((await info(f, id, annAuth)).task_id).toBe(id);
    const all = TaskListSchema.parse((await get(f.readUrl, '/v2/tasks', annAuth)).body);
    expect(all.tasks.map((t) => t.task_id)).toContain(id);
    // no credentials at all: 401, as every data-plane route
    expect((await get(f.readUrl, `/v2/tasks/${id}`, {})).status).toBe(401);
  });

  it('lists newest first with filters, and pages with a cursor without gaps or repeats', async () => {
    const f = await fleet(h, store);
    const ids: string[] = [];
    for (let i = 0; i < 7; i++) {
      ids.push(await admit(f, catAuth, { priority: i % 3 === 0 ? 'batch' : 'interactive' }));
      await ended(f, ids[i]!, catAuth);
    }
    const newestFirst = [...ids].reverse();
    const list = async (query: string) =>
      TaskListSchema.parse((await get(f.readUrl, `/v2/tasks${query}`, catAuth)).body);

    expect((await list('')).tasks.map((t) => t.task_id)).toEqual(newestFirst);
    expect((await list('?priority=batch')).tasks.map((t) => t.task_id)).toEqual(
      newestFirst.filter((id) => ids.indexOf(id) % 3 === 0),
    );
    expect((await list('?state=ended')).tasks).toHaveLength(7);
    expect((await list('?state=queued')).tasks).toHaveLength(0);
    expect((await list('?model=m')).tasks).toHaveLength(7);
    expect((await list('?model=other')).tasks).toHaveLength(0);
    const third = await info(f, ids[2]!, catAuth);
    expect((await list(`?since=${third.admitted_at}`)).tasks.map((t) => t.task_id)).toEqual(newestFirst.slice(0, 5));
    expect((await list(`?since=${new Date(Date.now() + 60_000).toISOString()}`)).tasks).toHaveLength(0);

    // pages of 3, with a task admitted between the pages: it is not in the older pages
    const seen: string[] = [];
    let page = await list('?limit=3');
    seen.push(...page.tasks.map((t) => t.task_id));
    const late = await admit(f, catAuth);
    await ended(f, late, catAuth);
    while (page.next_cursor !== undefined) {
      page = await list(`?limit=3&cursor=${encodeURIComponent(page.next_cursor)}`);
      seen.push(...page.tasks.map((t) => t.task_id));
    }
    expect(seen).toEqual(newestFirst);

    const bad = await get(f.readUrl, '/v2/tasks?state=sleeping', catAuth);
    expect(bad.status).toBe(400);
    expect(ErrorEnvelopeSchema.parse(bad.body).code).toBe('INVALID_PARAMS');
  });

  it('keeps at most task_retention_count records, and each for task_retention_ms after its end', async () => {
    const f = await fleet(h, store, { task_retention_count: 3, task_retention_ms: 1500 });
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      ids.push(await admit(f, catAuth));
      await ended(f, ids[i]!, catAuth);
    }
    const listed = TaskListSchema.parse((await get(f.readUrl, '/v2/tasks', annAuth)).body);
    expect(listed.tasks.map((t) => t.task_id)).toEqual(ids.slice(2).reverse());
    expect((await get(f.readUrl, `/v2/tasks/${ids[0]}`, catAuth)).status).toBe(404);
    await until(
      async () => (await get(f.readUrl, `/v2/tasks/${ids[4]}`, catAuth)).status === 404,
      'the last record to expire',
      5000,
    );
    expect(TaskListSchema.parse((await get(f.readUrl, '/v2/tasks', annAuth)).body).tasks).toHaveLength(0);
  });
});
