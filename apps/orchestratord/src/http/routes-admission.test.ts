import { ErrorEnvelopeSchema, type PoolSnapshot } from '@llama-orch/contracts';
import { afterEach, describe, expect, it } from 'vitest';
import { sharedStore, STORE_KINDS, storeHarness } from '../testing/store-harness.js';
import { ownedSessionId } from '../sessions/session-ids.js';
import {
  frames,
  makeApp as makeTestApp,
  registerNode,
  storeOf,
  snapshot,
  taskBody,
  waitFor,
  type TestApp,
} from '../testing/test-helpers.js';

function expectBackoff(res: { headers: Record<string, unknown>; json: () => unknown }): void {
  const retryAfter = Number(res.headers['retry-after']);
  const backoff = Number(res.headers['x-backoff-ms']);
  expect(retryAfter).toBeGreaterThanOrEqual(1);
  expect(backoff).toBeGreaterThan(0);
  expect((res.json() as { retry_after_ms: number }).retry_after_ms).toBe(backoff);
}

/** A pool whose only slot is busy (reported by the node), so admitted tasks stay queued. */
const busy = (over: Partial<PoolSnapshot> = {}) => snapshot({ pool_id: 'p', slots_total: 1, slots_free: 0, ...over });

// Against both cluster stores: with Redis the queue, task records and sessions are the cluster's.
describe.each(STORE_KINDS)('POST /v2/tasks (%s store)', (kind) => {
  const stores = storeHarness(kind);
  const makeApp = (over: Parameters<typeof makeTestApp>[0] = {}, tuning: Parameters<typeof makeTestApp>[1] = {}) =>
    makeTestApp(over, tuning, undefined, undefined, storeOf(kind, stores));
  let t: TestApp;
  afterEach(async () => t?.close());

  const post = (payload: unknown, headers: Record<string, string> = {}) =>
    t.app.inject({ method: 'POST', url: '/v2/tasks', headers: { ...t.auth, ...headers }, payload: payload as object });

  it('rejects malformed bodies with 400 INVALID_PARAMS naming the field', async () => {
    t = await makeApp();
    await registerNode(t, 'n1', [busy()]);
    const cases: [unknown, RegExp][] = [
      [{ ...taskBody(), ctx: 'big' }, /ctx/],
      [{ ...taskBody(), surprise: true }, /unknown field 'surprise'/],
      [{ ...taskBody(), workload: 'embedding' }, /workload/],
      [{ ...taskBody(), max_tokens: 0 }, /max_tokens/],
      [{ ...taskBody(), max_tokens: 40_000 }, /max_tokens/],
      [{ ...taskBody(), ctx: -1 }, /ctx/],
      [{ ...taskBody(), task_id: 'not-a-uuid' }, /task_id/],
      [{ ...taskBody(), priority: 'urgent' }, /priority/],
      [{ ...taskBody(), deadline_ms: 0 }, /deadline_ms/],
      [{ ...taskBody(), placement: { mode: 'pin' } }, /pin_pool_id/],
      [(({ model_ref: _m, ...rest }) => rest)(taskBody()), /model_ref/],
    ];
    for (const [payload, field] of cases) {
      const res = await post(payload);
      expect(res.statusCode, JSON.stringify(payload)).toBe(400);
      const env = ErrorEnvelopeSchema.parse(res.json());
      expect(env.code).toBe('INVALID_PARAMS');
      expect(env.message).toMatch(field);
    }
    const malformed = await t.app.inject({
      method: 'POST',
      url: '/v2/tasks',
      headers: { ...t.auth, 'content-type': 'application/json' },
      payload: '{"task_id": ',
    });
    expect(malformed.statusCode).toBe(400);
    expect(malformed.json()).toMatchObject({ code: 'INVALID_PARAMS', message: expect.stringMatching(/body/) });
    const text = await t.app.inject({
      method: 'POST',
      url: '/v2/tasks',
      headers: { ...t.auth, 'content-type': 'text/plain' },
      payload: 'hi',
    });
    expect(text.statusCode).toBe(400);
    expect(text.json()).toMatchObject({ code: 'INVALID_PARAMS' });
  });

  it('rejects a ctx above what the pools serving the model support', async () => {
    t = await makeApp();
    await registerNode(t, 'n1', [busy({ ctx: 2048 })]);
    const res = await post(taskBody({ ctx: 4096 }));
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({
      code: 'INVALID_PARAMS',
      message: expect.stringMatching(/^ctx: 4096 exceeds ctx_max 2048/),
    });
    expect((await post(taskBody({ ctx: 2048 }))).statusCode).toBe(202);
  });

  it('413 PAYLOAD_TOO_LARGE above body_limit', async () => {
    t = await makeApp({ body_limit: 1024 });
    const res = await post(taskBody({ prompt: 'x'.repeat(4096) }));
    expect(res.statusCode).toBe(413);
    expect(res.json()).toMatchObject({ code: 'PAYLOAD_TOO_LARGE' });
  });

  it('400 INVALID_PARAMS naming task_id for a duplicate task id', async () => {
    t = await makeApp();
    await registerNode(t, 'n1', [busy()]);
    const body = taskBody();
    expect((await post(body)).statusCode).toBe(202);
    const dup = await post(body);
    expect(dup.statusCode).toBe(400);
    expect(dup.json()).toMatchObject({
      code: 'INVALID_PARAMS',
      message: expect.stringMatching(/^task_id: .*already exists/),
    });
  });

  it('404 MODEL_NOT_FOUND, no back-off, for a model neither in the catalog nor served; 503 with back-off when its pools are down (MODEL_NOT_AVAILABLE) or a catalog model cannot be loaded (INSUFFICIENT_MEMORY)', async () => {
    t = await makeApp();
    const none = await post(taskBody());
    expect(none.statusCode).toBe(404);
    expect(none.json()).toMatchObject({ code: 'MODEL_NOT_FOUND', retriable: false });
    expect(none.headers['retry-after']).toBeUndefined();
    await registerNode(t, 'n1', [busy({ models: ['other'] }), busy({ pool_id: 'f', state: 'failed', ready: false })]);
    const failedOnly = await post(taskBody());
    expect(failedOnly.statusCode).toBe(503);
    expect(failedOnly.json()).toMatchObject({ code: 'MODEL_NOT_AVAILABLE', retriable: true });
    expectBackoff(failedOnly);
    const register = (payload: object) =>
      t.app.inject({ method: 'POST', url: '/v2/catalog/models', headers: t.auth, payload });
    expect((await register({ ref: 'on-demand', aliases: ['od'] })).statusCode).toBe(201);
    for (const name of ['on-demand', 'od']) {
      const unloaded = await post(taskBody({ model_ref: name }));
      expect(unloaded.statusCode, name).toBe(503);
      // loaded on first request (load-on-demand.test.ts) — here no node loads models on request
      expect(unloaded.json()).toMatchObject({
        code: 'INSUFFICIENT_MEMORY',
        retriable: true,
        message: expect.stringContaining('no online node loads models on request'),
      });
      expectBackoff(unloaded);
    }
    // a catalog alias of a model a pool serves under its ref is that model
    expect((await register({ ref: 'other', aliases: ['other-alias'] })).statusCode).toBe(201);
    const viaAlias = await post(taskBody({ model_ref: 'other-alias' }));
    expect(viaAlias.statusCode).toBe(202);
    const task = t.app.services.tasks.get(viaAlias.json().task_id);
    expect(task !== undefined && 'request' in task ? task.request.model_ref : undefined).toBe('other');
  });

  it('202 with absolute stream URLs and a started frame; empty preparation when a ready pool serves the model', async () => {
    t = await makeApp();
    await registerNode(t, 'n1', [busy()]);
    const body = taskBody();
    const res = await post(body);
    expect(res.statusCode).toBe(202);
    expect(res.json()).toEqual({
      task_id: body.task_id,
      queue_position: 0,
      predicted_start_ms: 0,
      backoff_ms: 0,
      streams: {
        sse: `http://127.0.0.1:8080/v2/tasks/${body.task_id}/events`,
        sse_verbose: `http://127.0.0.1:8080/v2/tasks/${body.task_id}/events?verbose=true`,
      },
      preparation: { steps: [] },
    });
    const task = t.app.services.tasks.get(body.task_id as string);
    expect(frames(task?.stream.text(0) ?? '')).toEqual([
      { id: 0, event: 'started', data: { queue_position: 0, predicted_start_ms: 0 } },
    ]);
  });

  it('uses public_url for stream links when configured', async () => {
    t = await makeApp({ public_url: 'https://orch.example.com/base/' });
    await registerNode(t, 'n1', [busy()]);
    const body = taskBody();
    const res = await post(body);
    expect(res.json().streams.sse).toBe(`https://orch.example.com/base/v2/tasks/${body.task_id}/events`);
  });

  it('admits a task for a model being provisioned and reports preparation steps with live progress', async () => {
    t = await makeApp();
    await registerNode(t, 'n1', [
      snapshot({
        pool_id: 'p',
        state: 'provisioning',
        ready: false,
        slots_free: 0,
        progress: { engine: 1, model: 0.25, model_bytes_done: 250, model_bytes_total: 1000 },
      }),
    ]);
    const res = await post(taskBody());
    expect(res.statusCode).toBe(202);
    const steps = res.json().preparation.steps;
    expect(steps).toEqual([
      expect.objectContaining({ id: 'p:engine_provision', kind: 'engine_provision', status: 'done' }),
      expect.objectContaining({
        id: 'p:model_fetch',
        kind: 'model_fetch',
        status: 'running',
        bytes_total: 1000,
        bytes_done: 250,
      }),
      expect.objectContaining({ id: 'p:pool_warmup', kind: 'pool_warmup', status: 'pending' }),
    ]);
  });

  it('predicted_start_ms grows with the queue ahead and the measured decode rate', async () => {
    t = await makeApp();
    await registerNode(t, 'n1', [busy({ decode_tps: 100 })]);
    const p = [];
    for (let i = 0; i < 3; i += 1)
      p.push((await post(taskBody({ max_tokens: 50 }))).json().predicted_start_ms as number);
    // 1 slot busy; each task ahead costs 50 tokens at 100 tok/s = 500 ms.
    expect(p).toEqual([500, 1000, 1500]);
    // 3 ahead + the busy slot = 4 service times, each estimated from this task's own 100 tokens.
    const slow = await post(taskBody({ max_tokens: 100 }));
    expect(slow.json().predicted_start_ms).toBe(4000);
    const batch = await post(taskBody({ max_tokens: 50, priority: 'batch' }));
    expect(batch.json().queue_position).toBe(4);
  });

  it('400 DEADLINE_UNMET when the measured predicted end is beyond the deadline and its margin', async () => {
    t = await makeApp();
    await registerNode(t, 'n1', [busy({ decode_tps: 10 })]);
    // 100 stated tokens at 10 tok/s: the busy slot's release in 10 s, then its own 10 s.
    const res = await post(taskBody({ max_tokens: 100, expected_tokens: 100, deadline_ms: 5000 }));
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({
      code: 'DEADLINE_UNMET',
      retriable: false,
      message: expect.stringMatching(/predicted start in 10000 ms, end in 20000 ms/),
    });
    // 20 s is within 16 s + 25 %.
    expect((await post(taskBody({ max_tokens: 100, expected_tokens: 100, deadline_ms: 16_000 }))).statusCode).toBe(202);
    // No task ended and no expected_tokens: the size is only the max_tokens cap, a guess never refused on.
    expect((await post(taskBody({ max_tokens: 100, deadline_ms: 5000 }))).statusCode).toBe(202);
  });

  it('429 ADMISSION_REJECT with Retry-After, X-Backoff-Ms and policy_label under the reject policy', async () => {
    t = await makeApp({ admission_capacity: 1, admission_policy: 'reject' });
    await registerNode(t, 'n1', [busy()]);
    expect((await post(taskBody())).statusCode).toBe(202);
    const res = await post(taskBody());
    expect(res.statusCode).toBe(429);
    expect(res.json()).toMatchObject({ code: 'ADMISSION_REJECT', policy_label: 'reject', retriable: true });
    expectBackoff(res);
  });

  it('drop-lru evicts the oldest batch task with an error frame, and answers 429 QUEUE_FULL_DROP_LRU when none is left', async () => {
    t = await makeApp({ admission_capacity: 1, admission_policy: 'drop-lru' });
    await registerNode(t, 'n1', [busy()]);
    const victim = taskBody({ priority: 'batch' });
    expect((await post(victim)).statusCode).toBe(202);
    expect((await post(taskBody())).statusCode).toBe(202);
    const stream = await t.app.inject({ method: 'GET', url: `/v2/tasks/${victim.task_id}/events`, headers: t.auth });
    expect(stream.statusCode).toBe(200);
    const f = frames(stream.body);
    expect(f.map((x) => x.event)).toEqual(['started', 'error']);
    expect(f[1]?.data).toMatchObject({ code: 'QUEUE_FULL_DROP_LRU', retriable: true });
    const full = await post(taskBody());
    expect(full.statusCode).toBe(429);
    expect(full.json()).toMatchObject({ code: 'QUEUE_FULL_DROP_LRU', policy_label: 'drop-lru' });
    expectBackoff(full);
  });

  it('a task pinned to an unknown pool ends with POOL_UNAVAILABLE; to a failed pool with POOL_UNREADY', async () => {
    t = await makeApp();
    await registerNode(t, 'n1', [busy(), busy({ pool_id: 'broken', state: 'failed', ready: false })]);
    const unknown = taskBody({ placement: { mode: 'pin', pin_pool_id: 'nope' } });
    expect((await post(unknown)).statusCode).toBe(202);
    const failed = taskBody({ placement: { mode: 'pin', pin_pool_id: 'broken' } });
    expect((await post(failed)).statusCode).toBe(202);
    for (const [task, code] of [
      [unknown, 'POOL_UNAVAILABLE'],
      [failed, 'POOL_UNREADY'],
    ] as const) {
      const res = await t.app.inject({ method: 'GET', url: `/v2/tasks/${task.task_id}/events`, headers: t.auth });
      const f = frames(res.body);
      expect(f.map((x) => x.event)).toEqual(['started', 'error']);
      expect(f[1]?.data).toMatchObject({ code, retriable: true });
    }
  });

  it('a strict-determinism task with no deterministic pool ends with POOL_UNAVAILABLE', async () => {
    t = await makeApp();
    await registerNode(t, 'n1', [busy()]);
    const body = taskBody({ determinism: 'strict' });
    expect((await post(body)).statusCode).toBe(202);
    const f = frames(
      (await t.app.inject({ method: 'GET', url: `/v2/tasks/${body.task_id}/events`, headers: t.auth })).body,
    );
    expect(f.at(-1)).toMatchObject({ event: 'error', data: { code: 'POOL_UNAVAILABLE' } });
  });

  it('a queued task whose deadline passes ends with DEADLINE_UNMET; metrics frames came first', async () => {
    t = await makeApp({}, { tickMs: 20, metricsIntervalMs: 50 });
    await registerNode(t, 'n1', [busy()]);
    const body = taskBody({ deadline_ms: 300 });
    expect((await post(body)).statusCode).toBe(202);
    const res = await t.app.inject({
      method: 'GET',
      url: `/v2/tasks/${body.task_id}/events?verbose=true`,
      headers: t.auth,
    });
    const f = frames(res.body);
    expect(f[0]?.event).toBe('started');
    expect(f.at(-1)).toMatchObject({ event: 'error', data: { code: 'DEADLINE_UNMET', retriable: false } });
    const metrics = f.filter((x) => x.event === 'metrics');
    expect(metrics.length).toBeGreaterThanOrEqual(2);
    expect(metrics[0]?.data).toMatchObject({ queue_depth: 1, queue_position: 0, phase: 'queued' });
    expect(typeof metrics[0]?.data.human).toBe('string');
    expect(f.map((x) => x.id)).toEqual(f.map((_, i) => i));
  });

  it('cancel: 204 for queued and ended tasks (end {canceled:true}, no token), 404 for unknown ones', async () => {
    t = await makeApp();
    await registerNode(t, 'n1', [busy()]);
    const body = taskBody();
    await post(body);
    const cancel = await t.app.inject({ method: 'POST', url: `/v2/tasks/${body.task_id}/cancel`, headers: t.auth });
    expect(cancel.statusCode).toBe(204);
    expect(cancel.headers['x-correlation-id']).toBeDefined();
    expect(
      (await t.app.inject({ method: 'POST', url: `/v2/tasks/${body.task_id}/cancel`, headers: t.auth })).statusCode,
    ).toBe(204);
    const f = frames(
      (await t.app.inject({ method: 'GET', url: `/v2/tasks/${body.task_id}/events`, headers: t.auth })).body,
    );
    expect(f.at(-1)).toEqual({
      id: f.length - 1,
      event: 'end',
      data: { tokens_out: 0, decode_ms: 0, decode_time_ms: 0, stop_type: 'cancel', canceled: true },
    });
    expect(f.some((x) => x.event === 'token')).toBe(false);
    expect(t.app.services.tasks.queueDepth()).toEqual({ interactive: 0, batch: 0 });
    const unknown = await t.app.inject({
      method: 'POST',
      url: '/v2/tasks/00000000-0000-4000-8000-000000000000/cancel',
      headers: t.auth,
    });
    expect(unknown.statusCode).toBe(404);
    expect(unknown.json()).toMatchObject({ code: 'NOT_FOUND' });
  });

  it('HEAD on a task stream is not a route (a probe must not cancel the task)', async () => {
    t = await makeApp();
    await registerNode(t, 'n1', [busy()]);
    const body = taskBody();
    await post(body);
    const head = await t.app.inject({ method: 'HEAD', url: `/v2/tasks/${body.task_id}/events`, headers: t.auth });
    expect(head.statusCode).toBe(404);
    expect(t.app.services.tasks.get(body.task_id as string)?.state).toBe('queued');
  });

  it('GET events: 404 for unknown tasks and after the grace period; 400 for a bad Last-Event-ID', async () => {
    t = await makeApp({ stream_grace_ms: 50 });
    await registerNode(t, 'n1', [busy()]);
    expect((await t.app.inject({ method: 'GET', url: '/v2/tasks/nope/events', headers: t.auth })).json()).toMatchObject(
      { code: 'NOT_FOUND' },
    );
    const body = taskBody();
    await post(body);
    const bad = await t.app.inject({
      method: 'GET',
      url: `/v2/tasks/${body.task_id}/events`,
      headers: { ...t.auth, 'last-event-id': 'abc' },
    });
    expect(bad.statusCode).toBe(400);
    expect(bad.json()).toMatchObject({ code: 'INVALID_PARAMS', message: expect.stringMatching(/Last-Event-ID/) });
    await t.app.inject({ method: 'POST', url: `/v2/tasks/${body.task_id}/cancel`, headers: t.auth });
    await waitFor(() => t.app.services.tasks.get(body.task_id as string) === undefined, 5000, 'retention expiry');
    expect(
      (await t.app.inject({ method: 'GET', url: `/v2/tasks/${body.task_id}/events`, headers: t.auth })).statusCode,
    ).toBe(404);
  });

  it('keeps at most stream_grace_max_tasks ended tasks: the oldest goes first, before its grace ends', async () => {
    t = await makeApp({ stream_grace_max_tasks: 2 });
    await registerNode(t, 'n1', [busy()]);
    const bodies = [taskBody(), taskBody(), taskBody()];
    for (const body of bodies) {
      await post(body);
      await t.app.inject({ method: 'POST', url: `/v2/tasks/${body.task_id}/cancel`, headers: t.auth });
    }
    const status = async (id: unknown) =>
      (await t.app.inject({ method: 'GET', url: `/v2/tasks/${String(id)}/events`, headers: t.auth })).statusCode;
    expect(await status(bodies[0]?.task_id)).toBe(404);
    expect(await status(bodies[1]?.task_id)).toBe(200);
    expect(await status(bodies[2]?.task_id)).toBe(200);
  });

  it('on close, every unfinished task gets exactly one error frame', async () => {
    t = await makeApp();
    await registerNode(t, 'n1', [busy()]);
    const body = taskBody();
    await post(body);
    const task = t.app.services.tasks.get(body.task_id as string);
    await t.close();
    expect(task?.stream.terminal).toMatchObject({ event: 'error', data: { code: 'INTERNAL', retriable: true } });
    expect(task?.stream.state).toBe('ended');
  });

  it('sessions: created by a task, 404 when unknown, DELETE 204 then 404', async () => {
    t = await makeApp();
    await registerNode(t, 'n1', [busy()]);
    const body = taskBody();
    await post(body);
    const info = await t.app.inject({ method: 'GET', url: `/v2/sessions/${body.session_id}`, headers: t.auth });
    expect(info.statusCode).toBe(200);
    expect(info.json()).toMatchObject({ session_id: body.session_id, turns: 0, tokens_out: 0, active_tasks: 1 });
    expect(
      (await t.app.inject({ method: 'GET', url: '/v2/sessions/00000000-0000-4000-8000-000000000000', headers: t.auth }))
        .statusCode,
    ).toBe(404);
    expect(
      (await t.app.inject({ method: 'DELETE', url: `/v2/sessions/${body.session_id}`, headers: t.auth })).statusCode,
    ).toBe(204);
    const gone = await t.app.inject({ method: 'DELETE', url: `/v2/sessions/${body.session_id}`, headers: t.auth });
    expect(gone.statusCode).toBe(404);
    expect(gone.json()).toMatchObject({ code: 'NOT_FOUND' });
  });

  it('a spent session token budget refuses new tasks (429 ADMISSION_REJECT, policy budget)', async () => {
    t = await makeApp({ session_token_budget: 1 });
    await registerNode(t, 'n1', [busy()]);
    const body = taskBody();
    // kept in the namespace of the key that admits (t.auth: LLORCH_API_TOKEN, the key `default`)
    const id = ownedSessionId('default', body.session_id as string);
    if (kind === 'memory') {
      t.app.services.sessions.taskStarted(id);
      t.app.services.sessions.taskEnded(id, 5);
    } else {
      // a turn of the session that relayed 5 tokens, admitted and ended through the cluster's steps
      const { lifecycle } = sharedStore(t.app.services.store);
      const turn = { id: `turn-${id}`, owner: 'elsewhere', record: '{}', ttlMs: 60_000, lifetimeMs: 60_000 };
      await lifecycle.admit({
        task: turn,
        entry: { lane: 'batch', group: 'other', payload: 'elsewhere' },
        sessionId: id,
      });
      await lifecycle.finish({
        id: turn.id,
        fence: 1,
        outcome: '{}',
        retainMs: 1000,
        dequeue: true,
        session: { id, tokensOut: 5 },
      });
    }
    const res = await post(body);
    expect(res.statusCode).toBe(429);
    expect(res.json()).toMatchObject({ code: 'ADMISSION_REJECT', policy_label: 'budget', retriable: false });
  });
});
