import { resolveTaskRequest, TaskRequestSchema } from '@llama-orch/contracts';
import { freeLoopbackPort } from '@llama-orch/daemon-support';
import { describe, expect, it } from 'vitest';
import { leaveTask } from '../testing/leftover-tasks.js';
import { annAuth, fixtureCluster, replicaHarness, until, type Replica } from '../testing/replica-harness.js';
import { frames, taskBody } from '../testing/test-helpers.js';

// A replica that died holding a pool's one slot for a /v1 stream: the node cancelled that
// generation when the connection dropped, so the slot is free there, but the cluster slot lease of
// the dead replica held it until its TTL, and the dead replica's queued tasks could not start
// before. The survivor that takes the /v1 task over gives that lease back at once (spec 65,
// Orphans; shared/takeover.ts). The leases here last 60 s: only their release explains a start.
describe("a dead replica's slot lease, given back when its running /v1 task is taken over", () => {
  const h = replicaHarness();
  const LEASE_MS = 60_000;

  /** A task record of replica `owner` (its address refuses connections), `queued` with its queue entry, or `running` on n1/p under a slot lease. */
  async function orphan(
    r: Replica,
    owner: string,
    address: string,
    o: ReturnType<typeof taskBody>,
    how: { running: boolean; ownerMs: number },
  ): Promise<string> {
    const id = String(o.task_id);
    const request = resolveTaskRequest(TaskRequestSchema.parse(o), { deadlineMs: 60_000, newId: () => id });
    const delivery = how.running ? 'stream' : 'events';
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
    const placement = {
      node_id: 'n1',
      pool_id: 'p',
      engine_version: 'x',
      address: 'http://127.0.0.1:1',
      frame_base: 2,
    };
    await leaveTask(
      r.store,
      { id, owner, record, lane: o.priority as 'interactive', ownerTtlMs: how.ownerMs },
      how.running ? { state: 'running', placement } : { state: 'queued' },
    );
    if (!how.running) return id;
    // as ClusterSlotLeases names it: the task id, then the dispatch
    expect(
      await r.store.leases.acquire({ poolKey: 'n1/p', slots: 1, leaseId: `${id}#dead0001.1`, ttlMs: LEASE_MS }),
    ).toMatchObject({ kind: 'granted' });
    return id;
  }

  const dispatched = (node: { dispatches: Array<{ body: { task_id?: unknown } }> }, id: string) =>
    node.dispatches.some((d) => d.body.task_id === id);

  it(
    'found dead by a resuming client: its queued task starts at once, its /v1 task ends INTERNAL, its lease is gone',
    { timeout: 30_000 },
    async () => {
      const { replicas, node } = await fixtureCluster(h, 'slots-seize:', 2);
      const [a, b] = replicas as [Replica, Replica];
      const address = `http://127.0.0.1:${await freeLoopbackPort()}`;
      await a.store.replicas.announce(
        { replica_id: 'dead', address, version: 'x', up_since: Date.now(), tasks_relayed: 0, load: 0 },
        LEASE_MS,
      );
      const v1 = await orphan(a, 'dead', address, taskBody({ max_tokens: 400 }), { running: true, ownerMs: LEASE_MS });
      const queued = await orphan(a, 'dead', address, taskBody(), { running: false, ownerMs: LEASE_MS });
      // every replica sees the pool's one slot leased
      await until(
        () => [a, b].every((r) => r.app.services.registry.poolsForModel('m')[0]?.free === 0),
        'the lease to reach every replica',
      );
      const start = Date.now();
      const reading = (async () => {
        for (let i = 0; ; i += 1) {
          const res = await b.app.inject({
            method: 'GET',
            url: `/v2/tasks/${queued}/events`,
            headers: { ...annAuth, 'last-event-id': '5' },
          });
          if (res.statusCode < 500 || i === 20) return res;
          await new Promise((ok) => setTimeout(ok, 100));
        }
      })();
      await until(() => dispatched(node, queued), 'the queued task to be dispatched', 5000);
      const took = Date.now() - start;
      const res = await reading;
      expect(res.statusCode, res.body).toBe(200);
      expect(
        frames(res.body)
          .map((f) => f.event)
          .filter((e) => e === 'end' || e === 'error'),
      ).toEqual(['end']);
      const v1Record = await a.store.tasks.get(v1);
      expect(v1Record).toMatchObject({ state: 'ended' });
      expect(JSON.parse(v1Record!.outcome!)).toMatchObject({
        event: 'error',
        data: { code: 'INTERNAL', retriable: true },
      });
      expect((await a.store.leases.list('n1/p')).filter((l) => l.startsWith(v1))).toEqual([]);
      expect(
        b.logs
          .records()
          .filter((l) => l.msg === 'orphaned task ended')
          .map((l) => [l.task_id, l.evidence]),
      ).toEqual([[v1, 'refused']]);
      expect(took).toBeLessThan(3000);
      console.log(
        `a dead replica's queued task dispatched ${took} ms after its client's read found the replica gone (its /v1 task's slot lease: ${LEASE_MS} ms)`,
      );
    },
  );

  it(
    'a running task of the same replica id renewed after the evidence (a restarted process) is not taken for the dead one',
    { timeout: 30_000 },
    async () => {
      const { replicas } = await fixtureCluster(h, 'slots-restarted:', 2);
      const [a, b] = replicas as [Replica, Replica];
      const address = `http://127.0.0.1:${await freeLoopbackPort()}`;
      await a.store.replicas.announce(
        { replica_id: 'dead', address, version: 'x', up_since: Date.now(), tasks_relayed: 0, load: 0 },
        LEASE_MS,
      );
      const queued = await orphan(a, 'dead', address, taskBody(), { running: false, ownerMs: LEASE_MS / 2 });
      // its lease ends after the queued task's: renewed by a later process with the id
      const later = await orphan(a, 'dead', address, taskBody({ max_tokens: 400 }), {
        running: true,
        ownerMs: LEASE_MS,
      });
      // a cancel through b finds the owner's address refusing: the queued task is seized and cancelled
      expect(
        (await b.app.inject({ method: 'POST', url: `/v2/tasks/${queued}/cancel`, headers: annAuth })).statusCode,
      ).toBe(204);
      await until(async () => (await a.store.tasks.get(queued))?.state === 'ended', 'the cancel to reach the store');
      expect(await a.store.tasks.get(later)).toMatchObject({ owner: 'dead', fence: 1, state: 'running' });
      expect((await a.store.leases.list('n1/p')).filter((l) => l.startsWith(later))).toHaveLength(1);
    },
  );

  it(
    "found by the lapsed-lease sweep: the /v1 task's lease goes with it, and the queued task starts",
    { timeout: 30_000 },
    async () => {
      const { replicas, node } = await fixtureCluster(h, 'slots-lapse:', 2);
      const [a] = replicas as [Replica, Replica];
      const address = `http://127.0.0.1:${await freeLoopbackPort()}`;
      // not listed, nobody reads: only the owner leases (300 ms) lapsing explains a takeover
      const v1 = await orphan(a, 'dead', address, taskBody({ max_tokens: 400 }), { running: true, ownerMs: 300 });
      const queued = await orphan(a, 'dead', address, taskBody(), { running: false, ownerMs: 300 });
      const start = Date.now();
      await until(() => dispatched(node, queued), 'the queued task to be dispatched', 5000);
      const took = Date.now() - start;
      await until(async () => (await a.store.tasks.get(queued))?.state === 'ended', 'the queued task to end');
      expect(await a.store.tasks.get(v1)).toMatchObject({ state: 'ended' });
      expect(await a.store.leases.list('n1/p')).toEqual([]);
      expect(took).toBeLessThan(3000);
    },
  );
});
