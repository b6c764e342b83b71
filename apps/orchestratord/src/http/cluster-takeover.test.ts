import { createConnection } from 'node:net';
import { resolveTaskRequest, TaskRequestSchema } from '@llama-orch/contracts';
import { freeLoopbackPort } from '@llama-orch/daemon-support';
import { describe, expect, it } from 'vitest';
import { FixturePoolManager } from '@llama-orch/fixture-pool-manager';
import { leaveTask } from '../testing/leftover-tasks.js';
import {
  annAuth,
  fixtureCluster,
  NODE,
  replicaHarness,
  until,
  type Replica,
  CLUSTER_HEARTBEAT_MS,
} from '../testing/replica-harness.js';
import { frames, taskBody } from '../testing/test-helpers.js';

// A replica whose address refuses connections while it is still a listed replica died: a read or
// cancel of its task through another replica takes the task over at once, long before its owner
// lease lapses (http/task-owner-proxy.ts, ClusterTasks.seize; spec 65, Orphans).
describe('taking over the tasks of a replica found dead', () => {
  const h = replicaHarness();

  const cluster = (prefix: string, n: number) => fixtureCluster(h, prefix, n);

  /**
   * What a replica killed with SIGKILL leaves: queued tasks with shared records under a lease that
   * is still live (60 s here: only evidence of death can explain a takeover within the test),
   * queue entries, and (`listed`) its announcement in the replica list; nothing listens at its address.
   */
  async function deadReplica(
    r: Replica,
    owner: string,
    listed: boolean,
    tasks: ReturnType<typeof taskBody>[],
    delivery = 'events',
  ): Promise<void> {
    const address = `http://127.0.0.1:${await freeLoopbackPort()}`;
    if (listed)
      await r.store.replicas.announce(
        { replica_id: owner, address, version: 'x', up_since: Date.now(), tasks_relayed: 0, load: 0 },
        60_000,
      );
    for (const o of tasks) {
      const request = resolveTaskRequest(TaskRequestSchema.parse(o), {
        deadlineMs: 60_000,
        newId: () => String(o.task_id),
      });
      const record = {
        model_ref: 'm',
        priority: o.priority,
        session_id: o.session_id,
        admitted_at: Date.now(),
        owner_url: address,
        request,
        correlation_id: 'c',
        delivery,
      };
      await leaveTask(r.store, {
        id: String(o.task_id),
        owner,
        record,
        lane: o.priority as 'batch',
        ownerTtlMs: 60_000,
      });
    }
  }

  const admit = async (r: Replica, task: ReturnType<typeof taskBody>) =>
    r.app.inject({ method: 'POST', url: '/v2/tasks', headers: annAuth, payload: task });
  const read = async (r: Replica, id: string | undefined, after?: number) =>
    r.app.inject({
      method: 'GET',
      url: `/v2/tasks/${id}/events`,
      headers: { ...annAuth, ...(after !== undefined ? { 'last-event-id': String(after) } : {}) },
    });
  /** As an EventSource resumes: again after 100 ms while the answer is a 5xx (at most 20 times). */
  const resume = async (r: Replica, id: string | undefined, after: number) => {
    for (let i = 0; ; i += 1) {
      const res = await read(r, id, after);
      if (res.statusCode < 500 || i === 20) return res;
      await new Promise((ok) => setTimeout(ok, 100));
    }
  };

  it(
    "a client resuming through another replica takes the dead replica's queued tasks over at once; they run in priority order and end once",
    { timeout: 30_000 },
    async () => {
      const { replicas, node } = await cluster('seize:', 2);
      const [a, b] = replicas as [Replica, Replica];
      // the slot is busy, so the orphans wait for it
      const long = taskBody({ max_tokens: 400 });
      expect((await admit(a, long)).statusCode).toBe(202);
      await until(() => node.active('p') === 1, 'the long task to run');
      const orphans = [taskBody({ priority: 'batch' }), taskBody({ priority: 'interactive' })];
      await deadReplica(a, 'dead', true, orphans);
      const start = Date.now();
      // their clients reconnect with Last-Event-ID through either replica at once, the batch one first
      const resumed = await Promise.all([resume(b, orphans[0]!.task_id, 5), resume(a, orphans[1]!.task_id, 5)]);
      const took = Date.now() - start;
      for (const res of resumed) {
        expect(res.statusCode, res.body).toBe(200);
        const got = frames(res.body);
        expect(got.filter((f) => f.event === 'token')).toHaveLength(4);
        expect(got.map((f) => f.event).filter((e) => e === 'end' || e === 'error')).toEqual(['end']);
        expect(Math.min(...got.map((f) => f.id))).toBeGreaterThan(5);
      }
      // the cluster's queue kept their order: the interactive one ran first
      expect(node.dispatches.map((d) => d.body.task_id)).toEqual([
        long.task_id,
        orphans[1]!.task_id,
        orphans[0]!.task_id,
      ]);
      const adopted = [a, b].map((r) => r.logs.records().filter((l) => l.msg === 'orphaned task adopted'));
      expect(
        adopted
          .flat()
          .map((l) => [l.task_id, l.evidence])
          .sort(),
      ).toEqual(orphans.map((o) => [o.task_id, 'refused']).sort());
      // both by one replica (seizeQueued): split between two, each would dispatch its share in its own order
      expect(adopted.map((l) => l.length).sort()).toEqual([0, 2]);
      // fence 2: seized with the dead replica's other queued tasks; 3: the record rewritten with the adopter's address.
      // The record held each end before its client got it (spec 65, Ending): no wait.
      for (const o of orphans)
        expect(await a.store.tasks.get(String(o.task_id))).toMatchObject({ state: 'ended', fence: 3 });
      // nowhere near the 60 s lease: the long task's 400 tokens and the orphans' own
      expect(took).toBeLessThan(10_000);
      console.log(
        `queued tasks of a dead replica (live 60 s lease) taken over on their clients' reconnect, ended ${took} ms later`,
      );
    },
  );

  it('a cancel through another replica takes the task over and cancels it there', { timeout: 30_000 }, async () => {
    const { replicas, node } = await cluster('seize-cancel:', 2);
    const [a, b] = replicas as [Replica, Replica];
    const long = taskBody({ max_tokens: 400 });
    expect((await admit(a, long)).statusCode).toBe(202);
    await until(() => node.active('p') === 1, 'the long task to run');
    const orphan = taskBody();
    await deadReplica(a, 'dead', true, [orphan]);
    const res = await b.app.inject({ method: 'POST', url: `/v2/tasks/${orphan.task_id}/cancel`, headers: annAuth });
    expect(res.statusCode, res.body).toBe(204);
    await until(
      async () => (await a.store.tasks.get(String(orphan.task_id)))?.state === 'ended',
      'the cancelled task ended in the store',
    );
    const stored = await a.store.tasks.get(String(orphan.task_id));
    expect(stored).toMatchObject({ state: 'ended', fence: 3 });
    expect(JSON.parse(stored!.outcome!)).toMatchObject({ event: 'end', data: { canceled: true } });
    expect(await a.store.queue.sizes()).toEqual({ interactive: 0, batch: 0 });
  });

  it(
    "a dead replica's queued /v1 task is ended by the replica that takes it over, never run: its client went with the dead replica",
    { timeout: 30_000 },
    async () => {
      const { replicas, node } = await cluster('seize-v1:', 2);
      const [a, b] = replicas as [Replica, Replica];
      const events = taskBody();
      const v1 = taskBody();
      await deadReplica(a, 'dead', true, [v1], 'stream');
      await deadReplica(a, 'dead', true, [events]);
      // a /v2 client's resume finds the owner dead: both queued tasks are taken over, only the /v2 one runs
      const res = await resume(b, events.task_id, 5);
      expect(res.statusCode, res.body).toBe(200);
      expect(frames(res.body).at(-1)).toMatchObject({ event: 'end' });
      const stored = await a.store.tasks.get(String(v1.task_id));
      expect(stored).toMatchObject({ state: 'ended' });
      expect(JSON.parse(stored!.outcome!)).toMatchObject({
        event: 'error',
        data: { code: 'INTERNAL', retriable: true },
      });
      expect(node.dispatches.map((d) => d.body.task_id)).toEqual([events.task_id]);
      expect(await a.store.queue.sizes()).toEqual({ interactive: 0, batch: 0 });
    },
  );

  it(
    'a replica that is not listed (it left: a clean stop) is not taken for dead: reads ask for a retry until its lease lapses',
    { timeout: 30_000 },
    async () => {
      const { replicas } = await cluster('seize-left:', 2);
      const [a, b] = replicas as [Replica, Replica];
      const orphan = taskBody();
      await deadReplica(a, 'left', false, [orphan]);
      const res = await read(b, orphan.task_id);
      expect(res.statusCode).toBe(500);
      expect(res.json()).toMatchObject({ code: 'INTERNAL', retriable: true });
      expect(await a.store.tasks.get(String(orphan.task_id))).toMatchObject({
        owner: 'left',
        fence: 1,
        state: 'queued',
      });
    },
  );

  it(
    'a replica that closes leaves the replica list before its listener stops accepting',
    { timeout: 30_000 },
    async () => {
      const [a, c] = [
        await h.replica('seize-close:', { heartbeat_interval_ms: CLUSTER_HEARTBEAT_MS }),
        await h.replica('seize-close:', { heartbeat_interval_ms: CLUSTER_HEARTBEAT_MS }),
      ];
      const url = new URL(await c.app.listen({ port: 0, host: '127.0.0.1' }));
      const id = c.app.services.replicas.identity.replicaId;
      await until(async () => (await a.store.replicas.list()).some((r) => r.replica_id === id), 'c to be listed');
      const refuses = (): Promise<boolean> =>
        new Promise((resolve) => {
          const s = createConnection({ host: url.hostname, port: Number(url.port) });
          s.once('connect', () => {
            s.destroy();
            resolve(false);
          });
          s.once('error', () => resolve(true));
        });
      const closing = c.app.close();
      await until(refuses, 'c to refuse connections');
      expect((await a.store.replicas.list()).map((r) => r.replica_id)).not.toContain(id);
      await closing;
    },
  );
});
