import { resolveTaskRequest, TaskRequestSchema } from '@llama-orch/contracts';
import { freeLoopbackPort } from '@llama-orch/daemon-support';
import { request } from 'undici';
import { describe, expect, it } from 'vitest';
import { nameUuid } from '../sessions/session-ids.js';
import { leaveTask } from '../testing/leftover-tasks.js';
import { ANN, CAT, DAN, fixtureCluster, replicaHarness, until, type Replica } from '../testing/replica-harness.js';
import { openSse, taskBody } from '../testing/test-helpers.js';

// Tenant isolation across replicas on a real redis-server: a task admitted through one replica by
// client key dan is probed through the other by client key cat (404, as an unknown id), by the
// operator ann and by dan (allowed); the same after the task was taken over from a dead replica.
// The owner is the record's `client_key`, so every replica decides alike (spec 65).
describe('tenants across replicas', () => {
  const h = replicaHarness();
  const bearer = (k: string) => ({ authorization: `Bearer ${k}` });
  const urlOf = (r: Replica) => `http://127.0.0.1:${(r.app.server.address() as { port: number }).port}`;

  const call = async (r: Replica, key: string, method: 'GET' | 'POST' | 'DELETE', path: string, body?: unknown) => {
    const res = await request(`${urlOf(r)}${path}`, {
      method,
      headers: { ...bearer(key), ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    const text = await res.body.text();
    return {
      status: res.statusCode,
      body: text.startsWith('{') ? (JSON.parse(text) as Record<string, unknown>) : text,
    };
  };

  it(
    'admitted on one replica, probed through the other: the owner and an operator may, another client key gets 404; sessions are per key',
    { timeout: 30_000 },
    async () => {
      const { replicas } = await fixtureCluster(h, 'tenants:', 2, { tokenIntervalMs: 10 });
      const [a, b] = replicas as [Replica, Replica];
      const task = taskBody({ max_tokens: 400 });
      expect((await call(a, DAN, 'POST', '/v2/tasks', task)).status).toBe(202);
      const owner = await openSse(`${urlOf(a)}/v2/tasks/${task.task_id}/events`, bearer(DAN));
      await owner.waitForFrame((f) => f.event === 'token');
      const events = `/v2/tasks/${task.task_id}/events`;

      const stranger = await openSse(`${urlOf(b)}${events}`, bearer(CAT));
      await stranger.done;
      expect(stranger.status).toBe(404);
      expect(JSON.parse(stranger.raw)).toMatchObject({ code: 'NOT_FOUND' });
      expect(await call(b, CAT, 'POST', `/v2/tasks/${task.task_id}/cancel`)).toMatchObject({
        status: 404,
        body: { code: 'NOT_FOUND' },
      });
      expect(owner.frames.some((f) => f.event === 'end' || f.event === 'error')).toBe(false);

      for (const key of [DAN, ANN]) {
        const through = await openSse(`${urlOf(b)}${events}`, bearer(key));
        expect(through.status).toBe(200);
        await through.waitForFrame((f) => f.event === 'token');
        through.abort();
      }
      expect((await call(b, ANN, 'POST', `/v2/tasks/${task.task_id}/cancel`)).status).toBe(204);
      expect(await owner.waitForFrame((f) => f.event === 'end')).toMatchObject({ data: { canceled: true } });
      // ended: still dan's and the operator's only
      const late = await openSse(`${urlOf(b)}${events}`, bearer(CAT));
      await late.done;
      expect(late.status).toBe(404);
      const replay = await openSse(`${urlOf(b)}${events}`, bearer(DAN));
      await replay.done;
      expect(replay.status).toBe(200);
      expect(replay.frames.at(-1)).toMatchObject({ event: 'end', data: { canceled: true } });

      // the task's session, read through the other replica
      const session = `/v2/sessions/${task.session_id}`;
      expect((await call(b, CAT, 'GET', session)).status).toBe(404);
      expect((await call(b, CAT, 'DELETE', session)).status).toBe(404);
      expect(await call(b, DAN, 'GET', session)).toMatchObject({ status: 200, body: { session_id: task.session_id } });
      expect(await call(b, ANN, 'GET', `${session}?key=dan`)).toMatchObject({
        status: 200,
        body: { session_id: task.session_id },
      });

      // the same user under two keys: two sessions in the shared store, whichever replica answers
      const complete = (r: Replica, key: string) =>
        call(r, key, 'POST', '/v1/completions', { model: 'm', prompt: 'x', max_tokens: 2, user: 'u' });
      expect((await complete(a, DAN)).status).toBe(200);
      expect((await complete(b, DAN)).status).toBe(200);
      expect((await complete(a, CAT)).status).toBe(200);
      const sid = nameUuid('user:u');
      expect((await call(b, DAN, 'GET', `/v2/sessions/${sid}`)).body).toMatchObject({ turns: 2, tokens_out: 4 });
      expect((await call(a, CAT, 'GET', `/v2/sessions/${sid}`)).body).toMatchObject({ turns: 1, tokens_out: 2 });
    },
  );

  it(
    "a dead replica's task: another key neither reads, cancels nor takes it over; its owner's read takes it over, and it stays the owner's",
    { timeout: 30_000 },
    async () => {
      const { replicas } = await fixtureCluster(h, 'tenants-takeover:', 2);
      const [a, b] = replicas as [Replica, Replica];
      // What a replica killed with SIGKILL leaves: a queued task of dan's under a live lease, its queue entry, its announcement; nothing listens at its address.
      const address = `http://127.0.0.1:${await freeLoopbackPort()}`;
      await a.store.replicas.announce(
        { replica_id: 'dead', address, version: 'x', up_since: Date.now(), tasks_relayed: 0, load: 0 },
        60_000,
      );
      const body = taskBody({ max_tokens: 4 });
      const id = String(body.task_id);
      const req = resolveTaskRequest(TaskRequestSchema.parse(body), { deadlineMs: 60_000, newId: () => id });
      const record = {
        model_ref: 'm',
        priority: req.priority,
        session_id: req.session_id,
        admitted_at: Date.now(),
        owner_url: address,
        request: req,
        correlation_id: 'c',
        client_key: 'dan',
        delivery: 'events',
      };
      await leaveTask(a.store, { id, owner: 'dead', record, lane: req.priority, ownerTtlMs: 60_000 });

      const events = `/v2/tasks/${id}/events`;
      expect(await call(b, CAT, 'GET', events)).toMatchObject({ status: 404, body: { code: 'NOT_FOUND' } });
      expect((await call(b, CAT, 'POST', `/v2/tasks/${id}/cancel`)).status).toBe(404);
      // nothing moved: cat's requests took nothing over
      expect(await a.store.tasks.get(id)).toMatchObject({ owner: 'dead', fence: 1, state: 'queued' });

      // dan's resume takes it over (the owner's address refuses) and reads it to its end
      const resumed = await call(b, DAN, 'GET', events);
      expect(resumed.status).toBe(200);
      expect(String(resumed.body)).toContain('event: end');
      await until(
        async () => (await a.store.tasks.get(id))?.state === 'ended',
        'the taken-over task to end in the store',
      );
      const taken = await a.store.tasks.get(id);
      expect(taken?.owner).not.toBe('dead');
      // after the takeover: still dan's (and the operator's) only, through either replica
      for (const r of [a, b]) {
        expect((await call(r, CAT, 'GET', events)).status).toBe(404);
        expect((await call(r, CAT, 'POST', `/v2/tasks/${id}/cancel`)).status).toBe(404);
        expect((await call(r, ANN, 'GET', events)).status).toBe(200);
        expect((await call(r, DAN, 'GET', events)).status).toBe(200);
      }
    },
  );
});
