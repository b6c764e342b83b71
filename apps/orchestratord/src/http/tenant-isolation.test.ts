import { createHash } from 'node:crypto';
import { ErrorEnvelopeSchema, OrchestratorConfigSchema } from '@llama-orch/contracts';
import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { buildApp, type OrchdApp } from '../app.js';
import { FixturePoolManager } from '@llama-orch/fixture-pool-manager';
import { nameUuid } from '../sessions/session-ids.js';
import { HB_MS } from '../testing/openai-cluster.js';
import { captureLogger, openSse, taskBody } from '../testing/test-helpers.js';
import { createUpstreamDispatchers } from '../upstream/dispatchers.js';
import { loadCredentials } from './credentials.js';

// Two tenants (client keys alice and carol) and an operator (ops) on one orchestratord: what one
// client key admitted is invisible to the other, exactly as an unknown id (404); the operator sees
// everything; the dashboard's data is for operators only. The replica and takeover cases are in
// cluster-tenants.test.ts.

const NODE = 'node-token-0123456789abcdef';
const ALICE = 'alice-key-0123456789abcdef';
const CAROL = 'carol-key-0123456789abcdef';
const OPS = 'ops-key-0123456789abcdef';
const sha = (s: string) => createHash('sha256').update(s).digest('hex');
const KEYS = `keys:
  - name: alice
    key_sha256: ${sha(ALICE)}
  - name: carol
    key_sha256: ${sha(CAROL)}
  - name: ops
    key_sha256: ${sha(OPS)}
    role: operator
`;
const bearer = (k: string) => ({ authorization: `Bearer ${k}` });
const json = { 'content-type': 'application/json' };

describe('tenants cannot see or touch each other’s work', () => {
  let app: OrchdApp | undefined;
  let node: FixturePoolManager | undefined;
  let closeUpstream: (() => Promise<void>) | undefined;
  afterEach(async () => {
    await app?.close();
    await node?.close();
    await closeUpstream?.();
  });

  /** orchestratord with the three keys, listening, and a FIXTURE node (one 1-slot pool of model `m`) heartbeating to it. */
  async function cluster(over: Record<string, unknown> = {}): Promise<string> {
    const config = OrchestratorConfigSchema.parse({
      node_token: NODE,
      keys_file: '/keys.yaml',
      heartbeat_interval_ms: 1000,
      ...over,
    });
    const credentials = loadCredentials({ config, env: {}, readFile: () => KEYS });
    const upstream = createUpstreamDispatchers();
    closeUpstream = () => upstream.close();
    app = await buildApp(
      { logger: captureLogger().logger, upstream: upstream.http1, upstreamH2c: upstream.h2c, credentials },
      config,
    );
    await app.listen({ host: '127.0.0.1', port: 0 });
    const url = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;
    node = await FixturePoolManager.start({
      nodeId: 'fx',
      pools: [{ pool_id: 'fp', models: ['m'], slots: 1 }],
      token: NODE,
      tokenIntervalMs: 5,
    });
    await node.startHeartbeats(url, HB_MS);
    return url;
  }

  const call = async (url: string, key: string, method: 'GET' | 'POST' | 'DELETE', path: string, body?: unknown) => {
    const res = await request(`${url}${path}`, {
      method,
      headers: { ...bearer(key), ...(body !== undefined ? json : {}) },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    const text = await res.body.text();
    return { status: res.statusCode, body: text === '' ? undefined : (JSON.parse(text) as Record<string, unknown>) };
  };

  it("a task's event stream and cancel: the owner and an operator may, another client key gets the 404 of an unknown id", async () => {
    const url = await cluster();
    const task = taskBody({ max_tokens: 400 });
    expect((await call(url, ALICE, 'POST', '/v2/tasks', task)).status).toBe(202);
    const owner = await openSse(`${url}/v2/tasks/${task.task_id}/events`, bearer(ALICE));
    expect(owner.status).toBe(200);
    await owner.waitForFrame((f) => f.event === 'token');

    const unknown = await call(url, CAROL, 'GET', `/v2/tasks/00000000-0000-4000-8000-000000000000/events`);
    const stranger = await openSse(`${url}/v2/tasks/${task.task_id}/events`, bearer(CAROL));
    await stranger.done;
    expect(stranger.status).toBe(404);
    expect(ErrorEnvelopeSchema.parse(JSON.parse(stranger.raw))).toMatchObject({
      code: unknown.body?.code,
      retriable: false,
    });
    const strangerCancel = await call(url, CAROL, 'POST', `/v2/tasks/${task.task_id}/cancel`);
    expect(strangerCancel).toMatchObject({ status: 404, body: { code: 'NOT_FOUND' } });
    expect((await call(url, CAROL, 'POST', `/v2/tasks/00000000-0000-4000-8000-000000000000/cancel`)).status).toBe(404);
    // carol's attempts changed nothing: the task still runs for alice
    expect(owner.frames.some((f) => f.event === 'end' || f.event === 'error')).toBe(false);

    const operator = await openSse(`${url}/v2/tasks/${task.task_id}/events`, bearer(OPS));
    expect(operator.status).toBe(200);
    await operator.waitForFrame((f) => f.event === 'token');
    expect((await call(url, OPS, 'POST', `/v2/tasks/${task.task_id}/cancel`)).status).toBe(204);
    expect(await owner.waitForFrame((f) => f.event === 'end')).toMatchObject({ data: { canceled: true } });
    await Promise.all([owner.done, operator.done]);

    // ended, within its grace: the same answers from the retained frames
    const again = await openSse(`${url}/v2/tasks/${task.task_id}/events`, bearer(ALICE));
    expect(again.status).toBe(200);
    await again.done;
    const late = await openSse(`${url}/v2/tasks/${task.task_id}/events`, bearer(CAROL));
    await late.done;
    expect(late.status).toBe(404);
    expect((await call(url, CAROL, 'POST', `/v2/tasks/${task.task_id}/cancel`)).status).toBe(404);
    expect((await call(url, ALICE, 'POST', `/v2/tasks/${task.task_id}/cancel`)).status).toBe(204);
    expect((await call(url, OPS, 'POST', `/v2/tasks/${task.task_id}/cancel`)).status).toBe(204);
  });

  it('two keys with the same user or session id have two sessions: separate budgets and turns; an operator reads either with ?key=', async () => {
    const url = await cluster({ session_token_budget: 3 });
    const complete = (key: string) =>
      call(url, key, 'POST', '/v1/completions', { model: 'm', prompt: 'x', max_tokens: 2, user: 'alice' });
    expect((await complete(ALICE)).status).toBe(200);
    expect((await complete(ALICE)).status).toBe(200);
    // alice's session spent its budget (4 of 3 tokens): refused for alice only
    expect(await complete(ALICE)).toMatchObject({ status: 429, body: { error: { code: 'ADMISSION_REJECT' } } });
    expect((await complete(CAROL)).status).toBe(200);

    const sid = nameUuid('user:alice');
    expect((await call(url, ALICE, 'GET', `/v2/sessions/${sid}`)).body).toMatchObject({
      session_id: sid,
      turns: 2,
      tokens_out: 4,
      tokens_budget_remaining: -1,
    });
    expect((await call(url, CAROL, 'GET', `/v2/sessions/${sid}`)).body).toMatchObject({
      session_id: sid,
      turns: 1,
      tokens_out: 2,
    });
    // a client key's ?key= reaches only its own session
    expect((await call(url, CAROL, 'GET', `/v2/sessions/${sid}?key=alice`)).body).toMatchObject({ turns: 1 });
    // the operator has no session of that id of its own; it names the tenant's
    expect((await call(url, OPS, 'GET', `/v2/sessions/${sid}`)).status).toBe(404);
    expect((await call(url, OPS, 'GET', `/v2/sessions/${sid}?key=alice`)).body).toMatchObject({
      session_id: sid,
      turns: 2,
    });
    expect((await call(url, OPS, 'GET', `/v2/sessions/${sid}?key=carol`)).body).toMatchObject({
      session_id: sid,
      turns: 1,
    });

    // a /v2 session id: carol cannot read or delete alice's
    const task = taskBody({ max_tokens: 1 });
    const sse = await request(`${url}/v2/tasks`, {
      method: 'POST',
      headers: { ...bearer(ALICE), ...json, accept: 'text/event-stream' },
      body: JSON.stringify(task),
    });
    await sse.body.text();
    const v2 = `/v2/sessions/${task.session_id}`;
    expect((await call(url, CAROL, 'GET', v2)).status).toBe(404);
    expect((await call(url, CAROL, 'DELETE', v2)).status).toBe(404);
    expect((await call(url, ALICE, 'GET', v2)).body).toMatchObject({ session_id: task.session_id, turns: 1 });
    expect((await call(url, OPS, 'DELETE', `${v2}?key=alice`)).status).toBe(204);
    expect((await call(url, ALICE, 'GET', v2)).status).toBe(404);
    // carol deleting her own session leaves alice's
    expect((await call(url, CAROL, 'DELETE', `/v2/sessions/${sid}`)).status).toBe(204);
    expect((await call(url, ALICE, 'GET', `/v2/sessions/${sid}`)).body).toMatchObject({ turns: 2 });
  });

  it("the dashboard's data routes take an operator key (a client key gets a 403 that says so); the page stays open", async () => {
    const url = await cluster();
    for (const path of ['/v2/dashboard', '/v2/dashboard/events']) {
      const refused = await call(url, CAROL, 'GET', path);
      expect(refused.status, path).toBe(403);
      expect(ErrorEnvelopeSchema.parse(refused.body)).toMatchObject({
        code: 'FORBIDDEN',
        message: expect.stringContaining('operator'),
      });
    }
    expect((await call(url, OPS, 'GET', '/v2/dashboard')).status).toBe(200);
    const events = await openSse(`${url}/v2/dashboard/events`, bearer(OPS));
    expect(events.status).toBe(200);
    events.abort();
    expect((await request(`${url}/`)).statusCode).toBe(200);
  });

  it('with no keys configured everything stays open', async () => {
    const config = OrchestratorConfigSchema.parse({ heartbeat_interval_ms: 1000 });
    const upstream = createUpstreamDispatchers();
    closeUpstream = () => upstream.close();
    app = await buildApp(
      { logger: captureLogger().logger, upstream: upstream.http1, upstreamH2c: upstream.h2c },
      config,
    );
    await app.listen({ host: '127.0.0.1', port: 0 });
    const url = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;
    node = await FixturePoolManager.start({
      nodeId: 'fx',
      pools: [{ pool_id: 'fp', models: ['m'], slots: 1 }],
      tokenIntervalMs: 2,
    });
    await node.startHeartbeats(url, HB_MS);
    const task = taskBody({ max_tokens: 2 });
    expect(
      (
        await request(`${url}/v2/tasks`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify(task),
        })
      ).statusCode,
    ).toBe(202);
    const sse = await openSse(`${url}/v2/tasks/${task.task_id}/events`);
    expect(sse.status).toBe(200);
    await sse.done;
    // the session is kept under the id the client sent
    expect((await request(`${url}/v2/sessions/${task.session_id}`)).statusCode).toBe(200);
    expect((await request(`${url}/v2/dashboard`)).statusCode).toBe(200);
  });
});
