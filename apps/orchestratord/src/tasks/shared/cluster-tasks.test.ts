import { resolveTaskRequest, TaskRequestSchema } from '@llama-orch/contracts';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import type { SharedStore } from '../../store/cluster-store.js';
import { STORE_KINDS, sleep, storeHarness } from '../../testing/store-harness.js';
import { until } from '../../testing/replica-harness.js';
import { taskBody } from '../../testing/test-helpers.js';
import { adoptedTask } from './adoption.js';
import { ClusterTasks } from './cluster-tasks.js';
import { newTaskRecord, type TaskPlacement, type TaskRecord } from '../task-record.js';

const logger = pino({ level: 'silent' });
const PLACEMENT: TaskPlacement = { node_id: 'n1', pool_id: 'p', engine_version: 'x', address: 'http://127.0.0.1:9' };

function task(): TaskRecord {
  const body = taskBody();
  const request = resolveTaskRequest(TaskRequestSchema.parse(body), {
    deadlineMs: 60_000,
    newId: () => String(body.task_id),
  });
  return newTaskRecord({
    request,
    log: logger,
    correlationId: `c-${request.task_id}`,
    now: Date.now(),
    predictedStartMs: 0,
    phase: 'queued',
  });
}

/** Admitted to the cluster, then held under its fence, as the shared coordinator does once the record is made. */
async function admit(cluster: ClusterTasks, t: TaskRecord): ReturnType<ClusterTasks['add']> {
  const added = await cluster.add(t, undefined);
  if (added.kind === 'queued') cluster.hold(t, added.fence);
  return added;
}

// The owner's side of a failed attempt (requeue) and another replica's takeover (adoptOrphans).
describe.each(STORE_KINDS)('cluster tasks: requeue and takeover (%s store)', (kind) => {
  const h = storeHarness(kind);
  const opened: ClusterTasks[] = [];
  afterEach(async () => {
    await Promise.all(opened.splice(0).map((c) => c.close()));
  });

  function replica(store: SharedStore, replicaId: string, ownerTtlMs: number): ClusterTasks {
    const c = new ClusterTasks({
      ...{ queue: store.queue, tasks: store.tasks, lifecycle: store.lifecycle, signals: store.signals, replicaId },
      ...{
        address: () => `http://${replicaId}.invalid`,
        logger,
        retainMs: 10_000,
        changed: () => undefined,
        ownerTtlMs,
      },
    });
    opened.push(c);
    return c;
  }

  it('a task requeued after a failed attempt is taken over as queued (not where that attempt ran); a requeue of a task taken over puts nothing back in the queue', async () => {
    const [sa, sb] = await h.open(2);
    const a = replica(sa!, 'A', 300);
    const b = replica(sb!, 'B', 10_000);
    const requeued = task();
    const running = task();
    for (const t of [requeued, running]) {
      expect(await admit(a, t)).toMatchObject({ kind: 'queued' });
      expect(await a.takeAndDispatch(t, PLACEMENT, 1)).toMatchObject({ kind: 'taken' });
    }
    await a.requeue(requeued, Date.now());
    expect(await sa!.queue.sizes()).toEqual({ interactive: 1, batch: 0 });
    // A stops renewing (dead, or cut from the store): B takes both over once their leases lapse
    await a.close();
    await sleep(450);
    const adopted = await b.adoptOrphans();
    expect(adopted.map((x) => [x.id, x.state, x.placement?.pool_id])).toEqual(
      expect.arrayContaining([
        [requeued.id, 'queued', undefined],
        [running.id, 'running', 'p'],
      ]),
    );
    // A's attempt of the running task fails before its first token: the record refuses A, and no entry goes back
    await expect(a.requeue(running, Date.now())).rejects.toThrow(/fenced/);
    expect(await sa!.queue.sizes()).toEqual({ interactive: 1, batch: 0 });
    // B dispatches its own record of the task (the adoption's lifecycle holds B's fence)
    const atB = adoptedTask(
      adopted.find((x) => x.id === requeued.id)!,
      1000,
      Date.now(),
    );
    expect(await b.takeAndDispatch(atB, PLACEMENT, 70)).toMatchObject({ kind: 'taken' });
    expect(await sa!.queue.sizes()).toEqual({ interactive: 0, batch: 0 });
  });

  it("a model's head taken by another replica blocks it; a task admitted with nothing ahead is not held back by that old head (its leaving was not announced)", async () => {
    const [sa, sb] = await h.open(2);
    const a = replica(sa!, 'A', 10_000);
    const b = replica(sb!, 'B', 10_000);
    const [first, behind] = [task(), task()];
    const model = first.request.model_ref;
    expect(await admit(b, first)).toMatchObject({ kind: 'queued' });
    expect(await admit(a, behind)).toMatchObject({ kind: 'queued', view: { ahead: 1 } });
    // A's task is behind B's: A tries, learns the head is not its own, and holds its tasks of the model
    expect(await a.takeAndDispatch(behind, PLACEMENT, 1)).toMatchObject({ kind: 'behind', first: first.id });
    expect(a.blocked(model)).toBe(true);
    // A's task leaves (cancelled), then B's: the model's queue is empty, which nobody announces
    await sa!.queue.remove(behind.id);
    expect(await b.takeAndDispatch(first, PLACEMENT, 1)).toMatchObject({ kind: 'taken' });
    expect(await admit(a, task())).toMatchObject({ kind: 'queued', view: { ahead: 0 } });
    expect(a.blocked(model)).toBe(false);
  });

  it("another replica's head blocks nothing until a take is answered behind; a task that passes with room clears the block", async () => {
    const [sa, sb] = await h.open(2);
    const a = replica(sa!, 'A', 10_000);
    const b = replica(sb!, 'B', 10_000);
    const [first, second, third] = [task(), task(), task()];
    const model = first.request.model_ref;
    expect(await admit(b, first)).toMatchObject({ kind: 'queued' });
    expect(await admit(a, second)).toMatchObject({ kind: 'queued', view: { ahead: 1 } });
    expect(await admit(b, third)).toMatchObject({ kind: 'queued' });
    // B's head, announced when it came back first (a requeue at the front signals), does not hold A's tasks
    expect(await b.takeAndDispatch(first, PLACEMENT, 1)).toMatchObject({ kind: 'taken' });
    await b.requeue(first, Date.now());
    await sleep(50);
    expect(a.blocked(model)).toBe(false);
    // with a 1-slot pool A's task has no room to pass B's: behind, and blocked while the head is B's
    const room = (slots: number) => ({ poolKey: 'n1/p', slots });
    await sa!.leases.acquire({ poolKey: 'n1/p', slots: 1, leaseId: `${second.id}#1`, ttlMs: 10_000 });
    expect(await a.takeAndDispatch(second, PLACEMENT, 1, room(1))).toMatchObject({ kind: 'behind', first: first.id });
    expect(a.blocked(model)).toBe(true);
    // on a 2-slot pool it passes, and the model is no longer held here
    expect(await a.takeAndDispatch(second, PLACEMENT, 1, room(2))).toMatchObject({ kind: 'taken' });
    expect(a.blocked(model)).toBe(false);
  });

  it("a task's end is delivered only once its record holds it, with the frame id delivered; the owner gone then, another replica adopts nothing", async () => {
    const [sa, sb] = await h.open(2);
    const a = replica(sa!, 'A', 300);
    const b = replica(sb!, 'B', 10_000);
    const t = task();
    t.stream.append({ event: 'started', data: { queue_position: 0, predicted_start_ms: 0 } });
    expect(await admit(a, t)).toMatchObject({ kind: 'queued' });
    expect(await a.takeAndDispatch(t, PLACEMENT, 1)).toMatchObject({ kind: 'taken' });
    // the end's write waits until released
    const lifecycle = sa!.lifecycle;
    const finish = lifecycle.finish.bind(lifecycle);
    let release = (): void => undefined;
    const gate = new Promise<void>((resolve) => (release = resolve));
    lifecycle.finish = async (f) => {
      await gate;
      return finish(f);
    };
    // released on failure too: close() waits for the write
    try {
      const end = { event: 'end', data: { tokens_out: 0, decode_ms: 0, decode_time_ms: 0 } } as const;
      let delivered: number | undefined;
      a.ended(t, end, undefined, false, () => (delivered = t.stream.append(end)));
      await sleep(100);
      expect(delivered).toBeUndefined();
      expect(await sb!.tasks.get(t.id)).toMatchObject({ state: 'running' });
      release();
      await until(() => delivered !== undefined, 'the end to be delivered');
      const stored = await sb!.tasks.get(t.id);
      expect(stored).toMatchObject({ state: 'ended' });
      expect(JSON.parse(stored!.outcome!)).toMatchObject({ event: 'end', id: delivered });
      // A dies right after its client got the end: its lease lapses, and B finds nothing to take over
      await a.close();
      await sleep(450);
      expect(await b.adoptOrphans()).toEqual([]);
    } finally {
      release();
    }
  });
});
