import { describe, expect, it } from 'vitest';
import type { TaskFinish } from '../store/task-lifecycle-store.js';
import { END_WRITE_WAIT_MS } from '../tasks/shared/end-writer.js';
import { annAuth, fixtureCluster, replicaHarness, until, type Replica } from '../testing/replica-harness.js';
import { sleep } from '../testing/store-harness.js';
import { frames, taskBody } from '../testing/test-helpers.js';

// With replicas, a task's end reaches its clients only once the shared record holds it (spec 65,
// Ending). The other order would let a replica killed between the two leave a `running` record
// that another replica adopts and ends differently from what the client saw.
describe('a task ending on a replica of a cluster', () => {
  const h = replicaHarness();

  /** Holds the replica's `lifecycle.finish` calls (the end's write) until `release`. */
  function holdEndWrites(r: Replica): { release(): void; reached: () => boolean } {
    const lifecycle = r.store.lifecycle;
    const finish = lifecycle.finish.bind(lifecycle);
    let release = (): void => undefined;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let reached = false;
    lifecycle.finish = async (f: TaskFinish) => {
      reached = true;
      await gate;
      return finish(f);
    };
    h.defer(async () => release());
    return { release: () => release(), reached: () => reached };
  }

  async function runTask(
    r: Replica,
  ): Promise<{ id: string; read: Promise<string>; settled: () => boolean; settledAt: () => number }> {
    const task = taskBody();
    const admitted = await r.app.inject({ method: 'POST', url: '/v2/tasks', headers: annAuth, payload: task });
    expect(admitted.statusCode, admitted.body).toBe(202);
    let settledAt = 0;
    const read = r.app
      .inject({ method: 'GET', url: `/v2/tasks/${task.task_id}/events`, headers: annAuth })
      .then((res) => {
        settledAt = Date.now();
        return res.body;
      });
    return { id: String(task.task_id), read, settled: () => settledAt > 0, settledAt: () => settledAt };
  }

  it('sends the end only once the record holds it, with the frame id the client got', { timeout: 30_000 }, async () => {
    const { replicas } = await fixtureCluster(h, 'end-order:', 1);
    const a = replicas[0] as Replica;
    const held = holdEndWrites(a);
    const t = await runTask(a);
    await until(held.reached, 'the end to be on its way to the store');
    await sleep(200);
    expect(t.settled(), 'the client got the end before the record held it').toBe(false);
    expect(await a.store.tasks.get(t.id)).toMatchObject({ state: 'running' });
    held.release();
    const got = frames(await t.read);
    const end = got.at(-1);
    expect(end).toMatchObject({ event: 'end' });
    // no wait: the record held the end before the client saw it
    const stored = await a.store.tasks.get(t.id);
    expect(stored).toMatchObject({ state: 'ended' });
    expect(JSON.parse(stored!.outcome!)).toMatchObject({ event: 'end', id: end!.id, data: { tokens_out: 4 } });
  });

  it(
    `sends the end anyway after ${END_WRITE_WAIT_MS} ms when the store does not answer, and the record takes it later`,
    { timeout: 30_000 },
    async () => {
      const { replicas } = await fixtureCluster(h, 'end-late:', 1);
      const a = replicas[0] as Replica;
      const held = holdEndWrites(a);
      const t = await runTask(a);
      await until(held.reached, 'the end to be on its way to the store');
      const reachedAt = Date.now();
      const got = frames(await t.read);
      expect(got.at(-1)).toMatchObject({ event: 'end' });
      const waited = t.settledAt() - reachedAt;
      expect(waited).toBeGreaterThanOrEqual(END_WRITE_WAIT_MS - 50);
      expect(waited).toBeLessThan(END_WRITE_WAIT_MS + 2000);
      expect(await a.store.tasks.get(t.id)).toMatchObject({ state: 'running' });
      held.release();
      await until(async () => (await a.store.tasks.get(t.id))?.state === 'ended', 'the record to take the end');
    },
  );
});
