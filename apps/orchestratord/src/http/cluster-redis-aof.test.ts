import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { FixturePoolManager } from '@llama-orch/fixture-pool-manager';
import { annAuth, fixtureCluster, replicaHarness, until, type Replica } from '../testing/replica-harness.js';
import { frames, taskBody } from '../testing/test-helpers.js';

// Redis killed and started again with its append-only file (fsynced every second, as `llorch up
// --replicas` runs it): the replicas go on without a restart, and new work runs.
describe('Redis SIGKILLed and restarted with its AOF data', () => {
  const h = replicaHarness({ aofDir: mkdtempSync(join(tmpdir(), 'llorch-aof-')) });

  const admit = async (r: Replica, task: ReturnType<typeof taskBody>) =>
    r.app.inject({ method: 'POST', url: '/v2/tasks', headers: annAuth, payload: task });
  /**
   * The task's terminal frame as a `/v2` client reads it: a stream that ends without one (the task
   * was handed off to the replica that took it over while this one's lease lapsed) is read again
   * with `Last-Event-ID`, as an EventSource does, through the other replica too.
   */
  const lastFrame = async (r: Replica, id: string | undefined, others: readonly Replica[] = []) => {
    let after: number | undefined;
    let last: ReturnType<typeof frames>[number] | undefined;
    for (let i = 0; i < 50; i += 1) {
      const via = i === 0 ? r : ([r, ...others][i % (others.length + 1)] ?? r);
      const headers = { ...annAuth, ...(after !== undefined ? { 'last-event-id': String(after) } : {}) };
      const res = await via.app.inject({ method: 'GET', url: `/v2/tasks/${id}/events`, headers });
      const got = frames(res.body);
      last = got.at(-1) ?? last;
      if (last?.event === 'end' || last?.event === 'error') return last;
      after = last?.id ?? after;
      await sleep(100);
    }
    return last;
  };

  it(
    'the running task ends (its node, silent in the store for the outage, is not taken offline), queued ones end once (run or typed), and tasks admitted after the restart run — no replica restarted',
    { timeout: 60_000 },
    async () => {
      const { replicas, node } = await fixtureCluster(h, 'aof:', 2, { tokenIntervalMs: 5 });
      const [a, b] = replicas as [Replica, Replica];
      const long = taskBody({ max_tokens: 700 });
      expect((await admit(a, long)).statusCode).toBe(202);
      await until(() => node.active('p') === 1, 'the long task to run');
      const queued = [taskBody(), taskBody()];
      expect((await admit(a, queued[0]!)).statusCode).toBe(202);
      expect((await admit(b, queued[1]!)).statusCode).toBe(202);
      // past the AOF's fsync every second
      await sleep(1200);
      // down for longer than the nodes' offline limit (3 heartbeat intervals): the outage is not a node's silence
      await h.server().kill();
      await sleep(900);
      await h.server().restart();
      const before = await Promise.all([
        lastFrame(a, long.task_id, [b]),
        lastFrame(a, queued[0]!.task_id, [b]),
        lastFrame(b, queued[1]!.task_id, [a]),
      ]);
      expect(before[0]?.event, JSON.stringify(before[0])).toBe('end');
      for (const f of before.slice(1)) expect(['end', 'error'], JSON.stringify(f)).toContain(f?.event);
      // new work after the restart, on both replicas
      const after = [taskBody(), taskBody(), taskBody(), taskBody()];
      const t0 = Date.now();
      for (const [i, t] of after.entries()) {
        await until(
          async () => (await admit(replicas[i % 2]!, t)).statusCode === 202,
          'admission to answer 202 again',
          10_000,
        );
      }
      const ends = await Promise.all(after.map((t, i) => lastFrame(replicas[i % 2]!, t.task_id)));
      expect(
        ends.map((f) => f?.event),
        JSON.stringify(ends),
      ).toEqual(['end', 'end', 'end', 'end']);
      console.log(`Redis restarted with its AOF: ${after.length} tasks admitted after it ran in ${Date.now() - t0} ms`);
    },
  );

  // Down longer than an owner lease (2 s): every replica lets its tasks go (queued ones wait to be
  // granted back, or follow the replica that took them), and once the store is back a replica finds
  // its own lapsed tasks among the orphans. Such a task must run or end: else its queue entry stays first in the cluster's
  // queue with nobody to dispatch it, and every task of the model after it hangs.
  it(
    'down longer than a lease: tasks admitted after the restart run, and every earlier task ended once with the outcome its client saw',
    { timeout: 60_000 },
    async () => {
      const { replicas, node } = await fixtureCluster(h, 'aof-long:', 2, { tokenIntervalMs: 5 });
      const [a, b] = replicas as [Replica, Replica];
      const long = taskBody({ max_tokens: 300 });
      expect((await admit(a, long)).statusCode).toBe(202);
      await until(() => node.active('p') === 1, 'the long task to run');
      const queued = [taskBody(), taskBody(), taskBody()];
      for (const [i, t] of queued.entries()) expect((await admit(replicas[i % 2]!, t)).statusCode).toBe(202);
      await sleep(1200);
      await h.server().kill();
      await sleep(3000);
      await h.server().restart();
      const owners = [a, a, b, a];
      const before = await Promise.all(
        [long, ...queued].map((t, i) => lastFrame(owners[i]!, t.task_id, [owners[i] === a ? b : a])),
      );
      for (const f of before) expect(['end', 'error'], JSON.stringify(f)).toContain(f?.event);
      const after = [taskBody(), taskBody(), taskBody(), taskBody()];
      for (const [i, t] of after.entries()) {
        await until(
          async () => (await admit(replicas[i % 2]!, t)).statusCode === 202,
          'admission to answer 202 again',
          10_000,
        );
      }
      const ends = await Promise.race([
        Promise.all(after.map((t, i) => lastFrame(replicas[i % 2]!, t.task_id))),
        sleep(20_000).then(() => 'tasks admitted after the restart still running 20 s later'),
      ]);
      expect(Array.isArray(ends) ? ends.map((f) => f?.event) : ends, JSON.stringify(ends)).toEqual([
        'end',
        'end',
        'end',
        'end',
      ]);
      // each earlier task's shared record: its terminal frame, read on the replica that did not own it, is the one its client saw
      let seen: Awaited<ReturnType<typeof lastFrame>>[] = [];
      await until(
        async () => {
          seen = await Promise.all([long, ...queued].map((t, i) => lastFrame(owners[i] === a ? b : a, t.task_id)));
          return seen.every((f, i) => f?.event === before[i]?.event && f?.data.code === before[i]?.data.code);
        },
        'every record to say what its client saw',
        10_000,
      ).catch((err: unknown) =>
        expect.fail(
          `${(err as Error).message}: clients saw ${JSON.stringify(before)}, records ${JSON.stringify(seen)}`,
        ),
      );
    },
  );

  // Let go for a whole lease (nobody could renew it, nobody else took it): a queued task is granted
  // back by the sweep once the store is back and runs as if nothing happened, whichever door it came
  // through (it does not end STORE_UNAVAILABLE when it is let go). The slot stays busy through the
  // outage: a queued task that finds a free slot while the store is away fails its claim at once
  // (STORE_UNAVAILABLE, retriable), which is another path.
  it(
    'down longer than a lease with one replica: its queued /v2 and /v1 tasks are taken back and run',
    { timeout: 60_000 },
    async () => {
      const { replicas, node } = await fixtureCluster(h, 'aof-take-back:', 1, { tokenIntervalMs: 5 });
      const [a] = replicas as [Replica];
      const long = taskBody({ max_tokens: 4000 });
      expect((await admit(a, long)).statusCode).toBe(202);
      await until(() => node.active('p') === 1, 'the long task to run');
      const queued = taskBody({ max_tokens: 3 });
      expect((await admit(a, queued)).statusCode).toBe(202);
      const chat = a.app.inject({
        method: 'POST',
        url: '/v1/chat/completions',
        headers: annAuth,
        payload: { model: 'm', messages: [{ role: 'user', content: 'hi' }], max_tokens: 3 },
      });
      await until(async () => (await a.store.queue.sizes()).interactive === 2, 'both to wait in the cluster queue');
      await sleep(1200);
      await h.server().kill();
      await until(
        () => a.logs.records().some((l) => l.msg === 'lost ownership of tasks: cluster store unreachable'),
        'the replica to let its tasks go',
        10_000,
      );
      await h.server().restart();
      await until(
        () => a.logs.records().filter((l) => l.msg === 'task taken back').length >= 3,
        'the three tasks to be taken back',
        15_000,
      );
      // still queued, nothing ended: the slot frees and they run
      expect(a.app.services.tasks.queueDepth().interactive).toBe(2);
      expect(
        (await a.app.inject({ method: 'POST', url: `/v2/tasks/${String(long.task_id)}/cancel`, headers: annAuth }))
          .statusCode,
      ).toBe(204);
      const answer = await chat;
      expect(answer.statusCode, answer.body).toBe(200);
      expect(answer.json()).toMatchObject({ object: 'chat.completion', usage: { completion_tokens: 3 } });
      expect(await lastFrame(a, queued.task_id)).toMatchObject({ event: 'end', data: { tokens_out: 3 } });
      expect(node.dispatches.filter((d) => d.body.task_id === queued.task_id)).toHaveLength(1);
      const stored = await a.store.tasks.get(String(queued.task_id));
      expect(JSON.parse(stored!.outcome!)).toMatchObject({ event: 'end' });
    },
  );
});
