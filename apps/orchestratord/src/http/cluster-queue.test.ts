import {
  AdmissionResponseSchema,
  ErrorEnvelopeSchema,
  resolveTaskRequest,
  TaskRequestSchema,
} from '@llama-orch/contracts';
import { describe, expect, it } from 'vitest';
import { FixturePoolManager } from '@llama-orch/fixture-pool-manager';
import { leaveTask } from '../testing/leftover-tasks.js';
import { annAuth, fixtureCluster, NODE, replicaHarness, until, type Replica } from '../testing/replica-harness.js';
import { frames, taskBody } from '../testing/test-helpers.js';

// The admission queue shared by replicas (Redis store): one capacity, one priority order, one position.
describe('the cluster admission queue across replicas', () => {
  const h = replicaHarness();

  const cluster = (prefix: string, n: number, over: Record<string, unknown> = {}) =>
    fixtureCluster(h, prefix, n, { over });

  const admit = async (r: Replica, task: ReturnType<typeof taskBody>) =>
    r.app.inject({ method: 'POST', url: '/v2/tasks', headers: annAuth, payload: task });
  const lastFrame = async (r: Replica, id: string | undefined) =>
    frames((await r.app.inject({ method: 'GET', url: `/v2/tasks/${id}/events`, headers: annAuth })).body).at(-1);

  it(
    'no batch task starts while an interactive one of the model waits on another replica; FIFO by admission within a lane; positions are cluster-wide',
    { timeout: 60_000 },
    async () => {
      const { replicas, node } = await cluster('prio:', 2);
      const [a, b] = replicas as [Replica, Replica];
      // the one slot is busy for a while (3 s: the 8 admissions below must all land before it frees,
      // on a loaded machine too), with a task of B: when it ends, B knows first that the slot is free
      const long = taskBody({ max_tokens: 1500 });
      expect((await admit(b, long)).statusCode).toBe(202);
      await until(() => node.active('p') === 1, 'the long task to run');
      const batch = Array.from({ length: 4 }, () => taskBody({ priority: 'batch' }));
      const inter = Array.from({ length: 4 }, () => taskBody({ priority: 'interactive' }));
      const positions: number[] = [];
      for (const t of batch) positions.push(AdmissionResponseSchema.parse((await admit(b, t)).json()).queue_position);
      for (const t of inter) positions.push(AdmissionResponseSchema.parse((await admit(a, t)).json()).queue_position);
      // batch tasks queue behind each other; each interactive one goes ahead of every batch task
      expect(positions).toEqual([0, 1, 2, 3, 0, 1, 2, 3]);
      const ends = await Promise.all([
        ...batch.map((t) => lastFrame(b, t.task_id)),
        ...inter.map((t) => lastFrame(a, t.task_id)),
        lastFrame(b, long.task_id),
      ]);
      expect(ends.map((f) => f?.event)).toEqual(Array.from({ length: 9 }, () => 'end'));
      const order = node.dispatches.map((d) => d.body.task_id);
      expect(order).toEqual([long.task_id, ...inter.map((t) => t.task_id), ...batch.map((t) => t.task_id)]);
      expect(node.refusedSaturated).toEqual([]);
    },
  );

  it(
    'reject acts on the cluster: capacity 3 over 3 replicas; a task id taken by another request is refused on another replica, the same request is admitted once',
    { timeout: 60_000 },
    async () => {
      const { replicas, node } = await cluster('reject:', 3, { admission_capacity: 3, admission_policy: 'reject' });
      const long = taskBody({ max_tokens: 250 });
      expect((await admit(replicas[0]!, long)).statusCode).toBe(202);
      await until(() => node.active('p') === 1, 'the long task to run');
      const queued = Array.from({ length: 3 }, () => taskBody());
      for (const [i, t] of queued.entries()) expect((await admit(replicas[i]!, t)).statusCode).toBe(202);
      for (const r of replicas) {
        const refused = await admit(r, taskBody());
        expect(refused.statusCode).toBe(429);
        expect(ErrorEnvelopeSchema.parse(refused.json())).toMatchObject({
          code: 'ADMISSION_REJECT',
          policy_label: 'reject',
        });
      }
      // the same request again on another replica (a retry; a balancer re-sending the POST of a replica that died answering it): admitted, once
      const retried = await admit(replicas[2]!, queued[0]!);
      expect(retried.statusCode, retried.body).toBe(202);
      expect(AdmissionResponseSchema.parse(retried.json()).task_id).toBe(queued[0]!.task_id);
      // another request under a taken id: refused
      const dup = await admit(replicas[2]!, { ...queued[0]!, prompt: 'something else' });
      expect(dup.statusCode).toBe(400);
      expect(ErrorEnvelopeSchema.parse(dup.json())).toMatchObject({ code: 'INVALID_PARAMS' });
      const ends = await Promise.all(queued.map((t, i) => lastFrame(replicas[i]!, t.task_id)));
      expect(ends.map((f) => f?.event)).toEqual(['end', 'end', 'end']);
    },
  );

  it(
    'drop-lru acts on the cluster: the oldest batch task, queued on another replica, ends QUEUE_FULL_DROP_LRU there; a cancelled task leaves the cluster queue',
    { timeout: 60_000 },
    async () => {
      const { replicas, node } = await cluster('lru:', 3, { admission_capacity: 2, admission_policy: 'drop-lru' });
      const [a, b, c] = replicas as [Replica, Replica, Replica];
      const long = taskBody({ max_tokens: 400 });
      expect((await admit(c, long)).statusCode).toBe(202);
      await until(() => node.active('p') === 1, 'the long task to run');
      const oldest = taskBody({ priority: 'batch' });
      const cancelled = taskBody({ priority: 'batch' });
      expect((await admit(a, oldest)).statusCode).toBe(202);
      expect((await admit(b, cancelled)).statusCode).toBe(202);
      expect(
        (await b.app.inject({ method: 'POST', url: `/v2/tasks/${String(cancelled.task_id)}/cancel`, headers: annAuth }))
          .statusCode,
      ).toBe(204);
      await until(
        async () => (await c.store.queue.sizes()).batch === 1,
        'the cancelled task to leave the cluster queue',
      );
      const next = taskBody({ priority: 'batch' });
      expect((await admit(b, next)).statusCode).toBe(202);
      // full (2): a new interactive task on C evicts A's batch task, the oldest
      const newer = taskBody({ priority: 'interactive' });
      expect((await admit(c, newer)).statusCode).toBe(202);
      const evicted = await lastFrame(a, oldest.task_id);
      expect(evicted).toMatchObject({ event: 'error', data: { code: 'QUEUE_FULL_DROP_LRU' } });
      expect((await lastFrame(b, cancelled.task_id))?.data).toMatchObject({ canceled: true });
      expect((await lastFrame(b, next.task_id))?.event).toBe('end');
      expect((await lastFrame(c, newer.task_id))?.event).toBe('end');
      const ran = node.dispatches.map((d) => d.body.task_id);
      expect(ran).not.toContain(oldest.task_id);
      expect(ran).not.toContain(cancelled.task_id);
    },
  );

  it(
    'a queued task whose replica died (its owner lease lapsed) ends typed instead of holding its model behind it',
    { timeout: 30_000 },
    async () => {
      const { replicas, node } = await cluster('orphan:', 2);
      const [a, b] = replicas as [Replica, Replica];
      // what a replica killed with SIGKILL leaves: a shared record nobody renews, and its queue entry
      const orphan = taskBody({ priority: 'interactive' });
      const record = {
        model_ref: 'm',
        priority: 'interactive',
        session_id: orphan.session_id,
        admitted_at: Date.now(),
        owner_url: 'http://127.0.0.1:9',
      };
      expect(
        await leaveTask(a.store, {
          id: String(orphan.task_id),
          owner: 'dead',
          record,
          lane: 'interactive',
          ownerTtlMs: 300,
        }),
      ).toEqual({ position: 0 });
      const behind = taskBody({ priority: 'batch' });
      expect(AdmissionResponseSchema.parse((await admit(b, behind)).json()).queue_position).toBe(1);
      expect((await lastFrame(b, behind.task_id))?.event).toBe('end');
      const stored = await a.store.tasks.get(String(orphan.task_id));
      expect(stored).toMatchObject({ state: 'ended' });
      expect(JSON.parse(stored!.outcome!)).toMatchObject({
        event: 'error',
        data: { code: 'INTERNAL', retriable: true },
      });
      expect(node.dispatches.map((d) => d.body.task_id)).toEqual([behind.task_id]);
      expect(await a.store.queue.sizes()).toEqual({ interactive: 0, batch: 0 });
      expect([a, b].flatMap((r) => r.logs.records().filter((l) => l.msg === 'orphaned task ended'))).toHaveLength(1);
    },
  );

  it(
    "a dead replica's queued tasks are dispatched by a survivor within two heartbeat intervals, in their priority order, and read and resumed through any replica",
    { timeout: 30_000 },
    async () => {
      const { replicas, node } = await cluster('adopt:', 2);
      const [a, b] = replicas as [Replica, Replica];
      // the slot is busy, so what follows queues
      const long = taskBody({ max_tokens: 150 });
      expect((await admit(b, long)).statusCode).toBe(202);
      await until(() => node.active('p') === 1, 'the long task to run');
      // what a replica killed with SIGKILL leaves: shared records nobody renews (with the requests), and queue entries
      const orphans = [taskBody({ priority: 'batch' }), taskBody({ priority: 'interactive' })];
      for (const o of orphans) {
        const request = resolveTaskRequest(TaskRequestSchema.parse(o), {
          deadlineMs: 60_000,
          newId: () => String(o.task_id),
        });
        const record = {
          model_ref: 'm',
          priority: o.priority,
          session_id: o.session_id,
          admitted_at: Date.now(),
          owner_url: 'http://127.0.0.1:9',
          request,
          correlation_id: 'c-' + String(o.task_id),
          delivery: 'events',
        };
        // the batch orphan had an attempt its node refused (saturated): back to `queued`, its record keeps that placement —
        // it must be dispatched anew, not re-attached (which would fail it and leave its entry first in the queue)
        const refused = {
          node_id: 'n1',
          pool_id: 'p',
          engine_version: 'x',
          address: 'http://127.0.0.1:9',
          frame_base: 1,
        };
        const left = { id: String(o.task_id), owner: 'dead', record, lane: o.priority as 'batch', ownerTtlMs: 1500 };
        await leaveTask(
          a.store,
          left,
          o === orphans[0] ? { state: 'requeued', placement: refused } : { state: 'queued' },
        );
      }
      const diedAt = Date.now();
      // admitted after them on a live replica: waits behind the dead replica's batch task
      const after = taskBody({ priority: 'batch' });
      expect((await admit(b, after)).statusCode).toBe(202);
      // until a survivor takes them over, reads go to the dead replica's address and fail (a client retries)
      const owners = async (): Promise<string[]> =>
        Promise.all(orphans.map(async (o) => (await a.store.tasks.get(String(o.task_id)))?.owner ?? ''));
      await until(async () => !(await owners()).includes('dead'), 'a survivor to take the orphans over', 5000);
      const adoptedAt = Date.now();
      const ends = await Promise.all([
        ...orphans.map((o) => lastFrame(a, o.task_id)),
        lastFrame(b, after.task_id),
        lastFrame(b, long.task_id),
      ]);
      expect(ends.map((f) => f?.event)).toEqual(['end', 'end', 'end', 'end']);
      // the interactive orphan first, then the batch orphan, then the live replica's later batch task
      expect(node.dispatches.map((d) => d.body.task_id)).toEqual([
        long.task_id,
        orphans[1]!.task_id,
        orphans[0]!.task_id,
        after.task_id,
      ]);
      const adopted = [a, b].flatMap((r) => r.logs.records().filter((l) => l.msg === 'orphaned task adopted'));
      expect(adopted).toHaveLength(2);
      // each shared record names its new owner, whose address every replica passes reads to
      for (const o of orphans) {
        const stored = await a.store.tasks.get(String(o.task_id));
        expect(stored).toMatchObject({ state: 'ended', fence: 2 });
        expect(stored!.owner).toMatch(/.+/);
        expect(stored!.owner).not.toBe('dead');
        // a client that had frames 0..5 from the dead replica resumes on either replica: nothing before 6, its tokens and one end
        for (const r of [a, b]) {
          const resumed = await r.app.inject({
            method: 'GET',
            url: `/v2/tasks/${String(o.task_id)}/events`,
            headers: { ...annAuth, 'last-event-id': '5' },
          });
          const got = frames(resumed.body);
          expect(got.filter((f) => f.event === 'token')).toHaveLength(4);
          expect(got.filter((f) => f.event === 'end')).toHaveLength(1);
          expect(Math.min(...[...resumed.body.matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1])))).toBeGreaterThan(5);
        }
      }
      console.log(
        `queued orphans taken over ${adoptedAt - diedAt} ms after their owner's last renewal (lease 1.5 s: a past attempt is written first; heartbeat 200 ms)`,
      );
    },
  );

  it(
    "a dead replica's task that it had put back in the queue (its record keeps the failed attempt's placement) is dispatched again by a survivor, not re-attached",
    { timeout: 30_000 },
    async () => {
      const { replicas, node } = await cluster('requeued:', 2);
      const [a, b] = replicas as [Replica, Replica];
      // what a replica leaves that dies (or loses the store) right after an attempt failed before its
      // first token: the record back to `queued` with the attempt's placement still in it, its entry at the head
      const orphan = taskBody({ priority: 'interactive', max_tokens: 4 });
      const id = String(orphan.task_id);
      const request = resolveTaskRequest(TaskRequestSchema.parse(orphan), { deadlineMs: 60_000, newId: () => id });
      const record = {
        model_ref: 'm',
        priority: 'interactive',
        session_id: orphan.session_id,
        admitted_at: Date.now(),
        owner_url: 'http://127.0.0.1:9',
        request,
        delivery: 'events',
      };
      const placement = {
        node_id: 'n1',
        pool_id: 'p',
        engine_version: 'x',
        address: 'http://127.0.0.1:9',
        frame_base: 1,
      };
      await leaveTask(
        a.store,
        { id, owner: 'dead', record, lane: 'interactive', ownerTtlMs: 1000 },
        { state: 'requeued', placement },
      );
      expect(await a.store.tasks.get(id)).toMatchObject({
        state: 'queued',
        fence: 1,
        placement: JSON.stringify(placement),
      });
      // admitted after it on a live replica: waits behind it until a survivor takes it over and runs it
      const after = taskBody({ priority: 'interactive', max_tokens: 4 });
      expect((await admit(b, after)).statusCode).toBe(202);
      await until(
        () => node.dispatches.some((d) => d.body.task_id === after.task_id),
        'the task behind it to be dispatched',
        10_000,
      );
      expect(node.dispatches.map((d) => d.body.task_id)).toEqual([id, after.task_id]);
      expect((await lastFrame(a, id))?.event).toBe('end');
      expect((await lastFrame(b, after.task_id))?.event).toBe('end');
      expect(await a.store.queue.sizes()).toEqual({ interactive: 0, batch: 0 });
      const adopted = [a, b].flatMap((r) => r.logs.records().filter((l) => l.msg === 'orphaned task adopted'));
      expect(adopted.map((l) => l.state)).toEqual(['queued']);
    },
  );

  it(
    'Redis restarted empty: queued tasks end typed, the running one finishes, nodes re-register and new tasks run — no replica restarted',
    { timeout: 60_000 },
    async () => {
      const { replicas, node } = await cluster('empty:', 2);
      const [a, b] = replicas as [Replica, Replica];
      const long = taskBody({ max_tokens: 600 });
      expect((await admit(a, long)).statusCode).toBe(202);
      await until(() => node.active('p') === 1, 'the long task to run');
      const queued = [taskBody(), taskBody()];
      expect((await admit(a, queued[0]!)).statusCode).toBe(202);
      expect((await admit(b, queued[1]!)).statusCode).toBe(202);
      await h.server().restart();
      const ends = await Promise.all([lastFrame(a, queued[0]!.task_id), lastFrame(b, queued[1]!.task_id)]);
      // their queue entries are gone, and so is the node until its next heartbeat: typed, retriable errors
      // (STORE_UNAVAILABLE when the long task ended while Redis was still down, and a queued one was given its slot then)
      for (const end of ends)
        expect(end).toMatchObject({
          event: 'error',
          data: { code: expect.stringMatching(/^(INTERNAL|MODEL_NOT_AVAILABLE|STORE_UNAVAILABLE)$/), retriable: true },
        });
      expect((await lastFrame(a, long.task_id))?.event).toBe('end');
      // the node's next heartbeat is unknown to the empty store: it registers again, and work resumes
      await until(async () => (await a.store.nodes.list()).length === 1, 'the node to register again', 10_000);
      await until(
        () => replicas.every((r) => r.app.services.registry.poolsForModel('m')[0]?.node_state === 'online'),
        'every replica to see n1 online again',
      );
      const after = taskBody();
      expect((await admit(b, after)).statusCode).toBe(202);
      expect((await lastFrame(b, after.task_id))?.event).toBe('end');
    },
  );
});
