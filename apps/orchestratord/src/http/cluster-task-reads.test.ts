import { ErrorEnvelopeSchema, SessionInfoSchema } from '@llama-orch/contracts';
import { request } from 'undici';
import { describe, expect, it } from 'vitest';
import { FixturePoolManager } from '@llama-orch/fixture-pool-manager';
import {
  annAuth,
  NODE,
  replicaHarness,
  until,
  type Replica,
  CLUSTER_HEARTBEAT_MS,
} from '../testing/replica-harness.js';
import { frames, taskBody } from '../testing/test-helpers.js';

// A task is readable and cancellable on any replica: the one that owns it answers (task-owner-proxy.ts).
describe('task reads across replicas', () => {
  const h = replicaHarness();

  let clusters = 0;
  async function cluster(
    n: number,
    pools = [{ pool_id: 'p', models: ['m'], slots: 2 }],
    over = {},
  ): Promise<{ replicas: Replica[]; urls: string[]; node: FixturePoolManager }> {
    // a cluster of its own per test: a node or task left in the store by the test before would be served here
    clusters += 1;
    const prefix = `reads${clusters}:`;
    const replicas = await Promise.all(
      Array.from({ length: n }, () =>
        h.replica(prefix, { heartbeat_interval_ms: CLUSTER_HEARTBEAT_MS, session_token_budget: 1000, ...over }),
      ),
    );
    const urls: string[] = [];
    for (const r of replicas) urls.push(await r.app.listen({ port: 0, host: '127.0.0.1' }));
    const node = await FixturePoolManager.start({ nodeId: 'n1', pools, token: NODE, tokenIntervalMs: 5 });
    h.defer(() => node.close());
    expect(await node.register(urls[0]!)).toBe(200);
    await node.startHeartbeats(urls[0]!, CLUSTER_HEARTBEAT_MS);
    h.defer(() => Promise.resolve(node.stopHeartbeats()));
    await until(
      () => replicas.every((r) => r.app.services.registry.poolsForModel('m').every((v) => v.node_state === 'online')),
      'every replica to see n1 online',
    );
    return { replicas, urls, node };
  }

  it(
    'events read on another replica are the owner’s frames, byte for byte, and resume after Last-Event-ID there',
    { timeout: 30_000 },
    async () => {
      const { urls } = await cluster(2);
      const task = taskBody({ max_tokens: 20 });
      const admitted = await request(`${urls[0]}/v2/tasks`, {
        method: 'POST',
        headers: { ...annAuth, 'content-type': 'application/json' },
        body: JSON.stringify(task),
      });
      expect(admitted.statusCode).toBe(202);
      await admitted.body.dump();
      const onB = await request(`${urls[1]}/v2/tasks/${String(task.task_id)}/events`, { headers: annAuth });
      expect(onB.statusCode).toBe(200);
      expect(onB.headers['content-type']).toMatch(/^text\/event-stream/);
      const text = await onB.body.text();
      expect(frames(text).at(-1)?.event).toBe('end');
      expect(frames(text).filter((f) => f.event === 'token')).toHaveLength(20);
      // the same stream on the owner, in the grace period: identical bytes
      const onA = await request(`${urls[0]}/v2/tasks/${String(task.task_id)}/events`, { headers: annAuth });
      expect(await onA.body.text()).toBe(text);
      // resume on B after frame 5: the owner's frames after it
      const resumed = await request(`${urls[1]}/v2/tasks/${String(task.task_id)}/events`, {
        headers: { ...annAuth, 'last-event-id': '5' },
      });
      const rest = frames(await resumed.body.text());
      expect(rest[0]?.id).toBe(6);
      expect(rest.at(-1)?.event).toBe('end');
      // a task no replica knows is a 404 everywhere, not a loop between replicas
      const unknown = await request(`${urls[1]}/v2/tasks/nope/events`, { headers: annAuth });
      expect(unknown.statusCode).toBe(404);
      expect(ErrorEnvelopeSchema.parse(await unknown.body.json())).toMatchObject({ code: 'NOT_FOUND' });
    },
  );

  it(
    'cancel on another replica cancels on the owner; a client leaving a stream read through another replica cancels the task on its owner',
    { timeout: 30_000 },
    async () => {
      const { urls, node } = await cluster(3);
      const long = taskBody({ max_tokens: 2000 });
      await (
        await request(`${urls[0]}/v2/tasks`, {
          method: 'POST',
          headers: { ...annAuth, 'content-type': 'application/json' },
          body: JSON.stringify(long),
        })
      ).body.dump();
      await until(() => node.active('p') === 1, 'the task to run');
      const cancel = await request(`${urls[2]}/v2/tasks/${String(long.task_id)}/cancel`, {
        method: 'POST',
        headers: annAuth,
      });
      expect(cancel.statusCode).toBe(204);
      await until(() => node.aborts.includes(String(long.task_id)), 'the node to see the abort');
      const ended = frames(
        await (await request(`${urls[1]}/v2/tasks/${String(long.task_id)}/events`, { headers: annAuth })).body.text(),
      ).at(-1);
      expect(ended).toMatchObject({ event: 'end', data: { canceled: true } });

      const left = taskBody({ max_tokens: 2000 });
      await (
        await request(`${urls[0]}/v2/tasks`, {
          method: 'POST',
          headers: { ...annAuth, 'content-type': 'application/json' },
          body: JSON.stringify(left),
        })
      ).body.dump();
      const reader = new AbortController();
      const res = await request(`${urls[1]}/v2/tasks/${String(left.task_id)}/events`, {
        headers: annAuth,
        signal: reader.signal,
      });
      for await (const chunk of res.body) if (String(chunk).includes('event: token')) break;
      reader.abort();
      await until(
        () => node.aborts.includes(String(left.task_id)),
        'the owner to cancel the task its only reader left',
      );
    },
  );

  it(
    'a replica restarted with the same id answers a retriable 500, not 404, for a live task of its earlier run; so does a replica a read was passed to after the task moved',
    { timeout: 30_000 },
    async () => {
      const { replicas, urls, node } = await cluster(1, undefined, { replica_id: 'same-id' });
      const task = taskBody({ max_tokens: 2000 });
      await (
        await request(`${urls[0]}/v2/tasks`, {
          method: 'POST',
          headers: { ...annAuth, 'content-type': 'application/json' },
          body: JSON.stringify(task),
        })
      ).body.dump();
      await until(() => node.active('p') === 1, 'the task to run');
      // the "restarted" replica: same id and store, none of the first one's tasks in memory
      const again = await h.replica(`reads${clusters}:`, {
        heartbeat_interval_ms: CLUSTER_HEARTBEAT_MS,
        replica_id: 'same-id',
      });
      const res = await again.app.inject({
        method: 'GET',
        url: `/v2/tasks/${String(task.task_id)}/events`,
        headers: annAuth,
      });
      expect(res.statusCode).toBe(500);
      expect(ErrorEnvelopeSchema.parse(res.json())).toMatchObject({ code: 'INTERNAL', retriable: true });
      expect(replicas[0]!.app.services.tasks.get(String(task.task_id))).toBeDefined();
      // a read passed on by a replica that saw an earlier owner (the task was taken over meanwhile): retriable, not 404
      const other = await h.replica(`reads${clusters}:`, {
        heartbeat_interval_ms: CLUSTER_HEARTBEAT_MS,
        replica_id: 'another-id',
      });
      const passed = await other.app.inject({
        method: 'GET',
        url: `/v2/tasks/${String(task.task_id)}/events`,
        headers: { ...annAuth, 'x-llorch-forwarded-by': 'r-old' },
      });
      expect(passed.statusCode).toBe(500);
      expect(ErrorEnvelopeSchema.parse(passed.json())).toMatchObject({ code: 'INTERNAL', retriable: true });
    },
  );

  it(
    'an ended task whose owner is gone: any replica replays its frames from the shared record, with their ids (was 404)',
    { timeout: 30_000 },
    async () => {
      const { replicas, urls } = await cluster(1, undefined, { replica_id: 'owner-id' });
      const other = await h.replica(`reads${clusters}:`, { heartbeat_interval_ms: CLUSTER_HEARTBEAT_MS });
      const otherUrl = await other.app.listen({ port: 0, host: '127.0.0.1' });
      const task = taskBody({ max_tokens: 6 });
      await (
        await request(`${urls[0]}/v2/tasks`, {
          method: 'POST',
          headers: { ...annAuth, 'content-type': 'application/json' },
          body: JSON.stringify(task),
        })
      ).body.dump();
      const all = frames(
        await (await request(`${urls[0]}/v2/tasks/${String(task.task_id)}/events`, { headers: annAuth })).body.text(),
      );
      expect(all.at(-1)?.event).toBe('end');
      // frames before the first token were the owner's queue metrics: the replay pads them
      const same = (got: typeof all, want: typeof all) => {
        expect(got.map((f) => [f.id, f.event])).toEqual(want.map((f) => [f.id, f.event]));
        expect(got.filter((f) => f.event !== 'metrics' && f.event !== 'started')).toEqual(
          want.filter((f) => f.event !== 'metrics' && f.event !== 'started'),
        );
      };
      await replicas[0]!.app.close();
      // the owner is gone (connection refused): a client that had read up to frame 2 resumes on the other replica
      const res = await request(`${otherUrl}/v2/tasks/${String(task.task_id)}/events`, {
        headers: { ...annAuth, 'last-event-id': '2' },
      });
      expect(res.statusCode).toBe(200);
      same(frames(await res.body.text()), all.slice(3));
      expect(
        (await request(`${otherUrl}/v2/tasks/${String(task.task_id)}/cancel`, { method: 'POST', headers: annAuth }))
          .statusCode,
      ).toBe(204);
      // a replica restarted with the owner's id holds none of its frames: it answers from the record too
      const again = await h.replica(`reads${clusters}:`, {
        heartbeat_interval_ms: CLUSTER_HEARTBEAT_MS,
        replica_id: 'owner-id',
      });
      const onAgain = await again.app.inject({
        method: 'GET',
        url: `/v2/tasks/${String(task.task_id)}/events`,
        headers: annAuth,
      });
      expect(onAgain.statusCode).toBe(200);
      same(frames(onAgain.body), all);
    },
  );

  it(
    'sessions: a conversation keeps its pool whichever replica takes each turn, and reads the same on every replica',
    { timeout: 30_000 },
    async () => {
      const pools = ['p1', 'p2', 'p3'].map((pool_id) => ({ pool_id, models: ['m'], slots: 4 }));
      // round-robin: without the session's affinity each turn would go to the next pool
      const { replicas, node } = await cluster(3, pools, { placement_strategy: 'round-robin' });
      const session = taskBody().session_id;
      for (let turn = 0; turn < 6; turn += 1) {
        const r = replicas[turn % 3]!;
        const task = taskBody({ session_id: session, max_tokens: 10 });
        expect(
          (await r.app.inject({ method: 'POST', url: '/v2/tasks', headers: annAuth, payload: task })).statusCode,
        ).toBe(202);
        const end = frames(
          (await r.app.inject({ method: 'GET', url: `/v2/tasks/${String(task.task_id)}/events`, headers: annAuth }))
            .body,
        ).at(-1);
        expect(end?.event, JSON.stringify(end)).toBe('end');
      }
      const served = node.dispatches.map((d) => d.pool_id);
      expect(served).toHaveLength(6);
      expect(new Set(served).size).toBe(1);
      // the turn's end is written to the store as the task ends, not awaited by its stream: a read
      // right after the last frame may be a round trip early
      const infoOn = async (r: Replica) =>
        SessionInfoSchema.parse(
          (await r.app.inject({ method: 'GET', url: `/v2/sessions/${String(session)}`, headers: annAuth })).json(),
        );
      await until(async () => (await infoOn(replicas[0]!)).turns === 6, 'the sixth turn to be counted');
      for (const r of replicas)
        expect(await infoOn(r)).toMatchObject({
          turns: 6,
          tokens_out: 60,
          tokens_budget_remaining: 940,
          active_tasks: 0,
        });
      expect(
        (await replicas[1]!.app.inject({ method: 'DELETE', url: `/v2/sessions/${String(session)}`, headers: annAuth }))
          .statusCode,
      ).toBe(204);
      expect(
        (await replicas[2]!.app.inject({ method: 'GET', url: `/v2/sessions/${String(session)}`, headers: annAuth }))
          .statusCode,
      ).toBe(404);
    },
  );
});
