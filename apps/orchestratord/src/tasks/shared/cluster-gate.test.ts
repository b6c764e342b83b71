import { randomUUID } from 'node:crypto';
import { resolveTaskRequest, TaskRequestSchema, type ErrorCode } from '@llama-orch/contracts';
import { describe, expect, it } from 'vitest';
import { AdmissionQueue } from '../../admission/admission-queue.js';
import type { ClusterSlotLeases } from '../../registry/cluster-slot-leases.js';
import type { Lease, PoolView } from '../../registry/pool-view.js';
import type { TakeDispatchOutcome } from '../../store/task-lifecycle-store.js';
import { captureLogger, taskBody } from '../../testing/test-helpers.js';
import { ClusterGate, gatedLine, type GateActions } from './cluster-gate.js';
import type { ClusterTasks, TaskOwner } from './cluster-tasks.js';
import { newTaskRecord, type Delivery, type TaskRecord } from '../task-record.js';

// Where the store refuses a queued task to this replica (let go, fenced, its entry gone), the gate
// asks who owns it first: a `/v2` task another replica took over (this one stalled past its lease)
// is handed off, not failed (spec 65, Orphans). The process-level stall: http/cluster-stall.process.test.ts.

function queuedTask(delivery: Delivery): TaskRecord {
  const request = resolveTaskRequest(TaskRequestSchema.parse(taskBody()), { deadlineMs: 60_000, newId: randomUUID });
  const task = newTaskRecord({
    request,
    log: captureLogger().logger,
    correlationId: 'c',
    now: 0,
    predictedStartMs: 0,
    phase: 'queued',
    delivery,
  });
  task.stream.append({ event: 'started', data: { queue_position: 0, predicted_start_ms: 0 } });
  return task;
}

/** The cluster side as the gate sees it: what the store answers a take, why an entry is gone, and who owns the task. */
function cluster(answers: {
  /** How long ago a let-go task was let go, ms. @default 0 */
  lostForMs?: number;
  take?: TakeDispatchOutcome | Error | Promise<TakeDispatchOutcome>;
  evicted?: boolean;
  owner: () => Promise<Partial<TaskOwner> | undefined>;
}) {
  const listeners: { lost?: (ids: readonly string[]) => void } = {};
  const asked: string[] = [];
  const lost = new Set<string>();
  const c = {
    lostFor: (id: string) => (lost.has(id) ? (answers.lostForMs ?? 0) : undefined),
    leaseMs: 2000,
    blocked: () => false,
    replicaId: 'r1',
    adoptEveryMs: 100,
    onLost: (l: (ids: readonly string[]) => void) => (listeners.lost = l),
    onSeized: () => () => undefined,
    takeAndDispatch: () =>
      answers.take instanceof Error
        ? Promise.reject(answers.take)
        : Promise.resolve(answers.take ?? { kind: 'absent' }),
    whyGone: (id: string) => Promise.resolve({ id, evicted: answers.evicted ?? false }),
    gone: (ids: readonly string[]) => Promise.resolve(ids.map((id) => ({ id, evicted: answers.evicted ?? false }))),
    ownerOf: (id: string) => {
      asked.push(id);
      return answers.owner();
    },
    unblock: () => undefined,
    storeProblem: () => undefined,
  };
  return {
    cluster: c as unknown as ClusterTasks,
    /** This replica lets the tasks go (OwnerLeases: their lifecycles say so, then the listeners hear it). */
    lose: (tasks: readonly TaskRecord[]) => {
      for (const task of tasks) {
        lost.add(task.id);
        if (task.life.ownership.kind === 'none') task.life.hold(1);
        task.life.letGo(0);
      }
      listeners.lost?.(tasks.map((t) => t.id));
    },
    /** The orphan sweep granted the task back to this replica (ClusterTasks' takeBack). */
    takeBack: (task: TaskRecord) => {
      lost.delete(task.id);
      task.life.hold(2);
    },
    asked,
  };
}

function gateWith(c: ClusterTasks, leases?: ClusterSlotLeases) {
  const queue = new AdmissionQueue<TaskRecord>({
    capacity: 100,
    policy: 'reject',
    groupOf: (t) => t.request.model_ref,
  });
  const failed: Array<[string, ErrorCode]> = [];
  const handedOff: Array<[string, string]> = [];
  const actions: GateActions = {
    dispatch: () => undefined,
    fail: (task, code) => {
      task.life.end('frame');
      failed.push([task.id, code]);
    },
    pump: () => undefined,
    adopt: () => undefined,
    handOff: (task, to) => {
      task.life.end('moved');
      handedOff.push([task.id, to]);
    },
  };
  return { gate: new ClusterGate(c, queue, actions, leases), queue, failed, handedOff };
}

const view = {
  node_id: 'n1',
  pool_id: 'p',
  address: 'http://127.0.0.1:1',
  snapshot: { engine_version: 'x' },
} as unknown as PoolView;
const lease = (): Lease & { released: number } => {
  const l = { released: 0, release: () => void (l.released += 1) };
  return l as unknown as Lease & { released: number };
};
const settled = () => new Promise((ok) => setTimeout(ok, 10));
const byR2 = () => Promise.resolve({ replica: 'r2', fence: 2 });

describe('a queued task the store refuses to this replica', () => {
  it('let go (renewal refused or a whole lease without one): a /v2 task another replica owns is handed off there', async () => {
    const c = cluster({ owner: byR2 });
    const { queue, failed, handedOff } = gateWith(c.cluster);
    const task = queuedTask('events');
    queue.enqueue(task.id, 'interactive', task);
    c.lose([task]);
    await settled();
    expect(handedOff).toEqual([[task.id, 'r2']]);
    expect(failed).toEqual([]);
    expect(queue.has(task.id)).toBe(false);
  });

  it('let go, but still this replica’s or the store unreachable: it stays queued, out of the scheduler’s sight, until the sweep grants it back', async () => {
    for (const delivery of ['events', 'stream'] as const) {
      for (const owner of [
        () => Promise.resolve({ replica: 'r1', fence: 1 }),
        () => Promise.reject(new Error('store down')),
      ]) {
        const c = cluster({ owner });
        const { queue, failed, handedOff } = gateWith(c.cluster);
        const task = queuedTask(delivery);
        queue.enqueue(task.id, 'interactive', task);
        c.lose([task]);
        await settled();
        const line = gatedLine(queue, c.cluster);
        expect([failed, handedOff, queue.has(task.id), [...line].length]).toEqual([[], [], true, 0]);
        // the reconcile looks again, and leaves it
        await gateWith(c.cluster).gate.reconcile();
        await settled();
        expect([failed, queue.has(task.id)]).toEqual([[], true]);
        // granted back (nobody else took it): the scheduler sees it again, it runs as if nothing happened
        c.takeBack(task);
        expect([...line].map((e) => e.item.id)).toEqual([task.id]);
        expect(task.state).toBe('queued');
      }
    }
  });

  it('let go longer than a lease with the store unreachable or still naming this replica: it ends STORE_UNAVAILABLE (a replica cut off from the store cannot tell that another ran it)', async () => {
    for (const owner of [
      () => Promise.resolve({ replica: 'r1', fence: 1 }),
      () => Promise.reject(new Error('store down')),
    ]) {
      const c = cluster({ owner, lostForMs: 2001 });
      const { queue, failed } = gateWith(c.cluster);
      const task = queuedTask('events');
      queue.enqueue(task.id, 'interactive', task);
      c.lose([task]);
      await settled();
      expect([failed, queue.has(task.id)]).toEqual([[[task.id, 'STORE_UNAVAILABLE']], false]);
    }
  });

  it('let go and its record gone from the store: it ends INTERNAL (nothing left to grant it back)', async () => {
    const c = cluster({ owner: () => Promise.resolve(undefined) });
    const { queue, failed } = gateWith(c.cluster);
    const task = queuedTask('events');
    queue.enqueue(task.id, 'interactive', task);
    c.lose([task]);
    await settled();
    expect([failed, queue.has(task.id)]).toEqual([[[task.id, 'INTERNAL']], false]);
  });

  it('a /v1 task (its client cannot follow it) another replica took ends STORE_UNAVAILABLE', async () => {
    for (const delivery of ['stream', 'answer'] as const) {
      const c = cluster({ owner: byR2 });
      const { queue, failed, handedOff } = gateWith(c.cluster);
      const task = queuedTask(delivery);
      queue.enqueue(task.id, 'interactive', task);
      c.lose([task]);
      await settled();
      expect([failed, handedOff, queue.has(task.id)]).toEqual([[[task.id, 'STORE_UNAVAILABLE']], [], false]);
    }
  });

  it('its dispatch refused (fenced): handed off to the owner; the local slot lease goes back', async () => {
    const c = cluster({ take: { kind: 'refused', refusal: { reason: 'fenced' } } as TakeDispatchOutcome, owner: byR2 });
    const { gate, failed, handedOff } = gateWith(c.cluster);
    const task = queuedTask('events');
    const l = lease();
    gate.assigned(task, view, l, 'strategy');
    await settled();
    expect([handedOff, failed, l.released]).toEqual([[[task.id, 'r2']], [], 1]);
  });

  it('its take failed (a call in flight through the stall timed out as the replica ran again): handed off when another replica owns it, else STORE_UNAVAILABLE', async () => {
    for (const [owner, handed] of [
      [byR2, true],
      [() => Promise.reject(new Error('store down')), false],
    ] as const) {
      const c = cluster({ take: new Error('Command timed out'), owner });
      const { gate, failed, handedOff } = gateWith(c.cluster);
      const task = queuedTask('events');
      gate.assigned(task, view, lease(), 'strategy');
      await settled();
      expect([handedOff, failed]).toEqual(handed ? [[[task.id, 'r2']], []] : [[], [[task.id, 'STORE_UNAVAILABLE']]]);
    }
  });

  it('let go while its claim was under way (waiting for a cluster slot lease, or behind another task): handed off, not put back in the local queue', async () => {
    let noSlot: (lease: string | undefined) => void = () => undefined;
    const leases = {
      acquire: () => new Promise<string | undefined>((ok) => (noSlot = ok)),
      release: () => undefined,
    } as unknown as ClusterSlotLeases;
    const waiting = cluster({ owner: byR2 });
    const first = gateWith(waiting.cluster, leases);
    const task = queuedTask('events');
    first.gate.assigned(task, view, lease(), 'strategy');
    waiting.lose([task]);
    noSlot(undefined);
    await settled();
    expect([first.handedOff, first.queue.has(task.id)]).toEqual([[[task.id, 'r2']], false]);

    let behind: (o: TakeDispatchOutcome) => void = () => undefined;
    const racing = cluster({ take: new Promise((ok) => (behind = ok)), owner: byR2 });
    const second = gateWith(racing.cluster);
    const other = queuedTask('events');
    second.gate.assigned(other, view, lease(), 'strategy');
    racing.lose([other]);
    behind({ kind: 'behind', first: 'someone-else' });
    await settled();
    expect([second.handedOff, second.queue.has(other.id)]).toEqual([[[other.id, 'r2']], false]);
  });

  it('its entry gone when it would go, or found gone by the check: handed off when another replica owns it; evicted ends QUEUE_FULL_DROP_LRU without asking', async () => {
    const absent = cluster({ take: { kind: 'absent' }, owner: byR2 });
    const first = gateWith(absent.cluster);
    const task = queuedTask('events');
    first.gate.assigned(task, view, lease(), 'strategy');
    await settled();
    expect(first.handedOff).toEqual([[task.id, 'r2']]);

    const gone = cluster({ owner: byR2 });
    const second = gateWith(gone.cluster);
    const other = queuedTask('events');
    second.queue.enqueue(other.id, 'interactive', other);
    await second.gate.reconcile();
    await settled();
    expect([second.handedOff, second.failed]).toEqual([[[other.id, 'r2']], []]);

    const evicted = cluster({ evicted: true, owner: byR2 });
    const third = gateWith(evicted.cluster);
    const dropped = queuedTask('events');
    third.queue.enqueue(dropped.id, 'batch', dropped);
    await third.gate.reconcile();
    await settled();
    expect([third.failed, third.handedOff, evicted.asked]).toEqual([[[dropped.id, 'QUEUE_FULL_DROP_LRU']], [], []]);
  });

  it('cancelled while the store was asked: neither handed off nor failed again', async () => {
    let answer: (o: Partial<TaskOwner>) => void = () => undefined;
    const c = cluster({ owner: () => new Promise((ok) => (answer = ok)) });
    const { queue, failed, handedOff } = gateWith(c.cluster);
    const task = queuedTask('events');
    queue.enqueue(task.id, 'interactive', task);
    c.lose([task]);
    task.life.end('frame');
    answer({ replica: 'r2', fence: 2 });
    await settled();
    expect([failed, handedOff]).toEqual([[], []]);
  });
});

describe('the queue depth a replica reports', () => {
  it("counts a task whose claim is in flight (out of the local queue, still in the cluster's): the per-replica gauges sum to the cluster queue", async () => {
    let answer!: (o: TakeDispatchOutcome) => void;
    const c = cluster({ take: new Promise<TakeDispatchOutcome>((ok) => (answer = ok)), owner: byR2 });
    const { gate } = gateWith(c.cluster);
    const task = queuedTask('events');
    expect(gate.claiming()).toEqual({ interactive: 0, batch: 0 });
    gate.assigned(task, view, lease(), 'strategy');
    expect(gate.claiming()).toEqual({
      [task.request.priority]: 1,
      [task.request.priority === 'interactive' ? 'batch' : 'interactive']: 0,
    });
    answer({ kind: 'absent' });
    await settled();
    expect(gate.claiming()).toEqual({ interactive: 0, batch: 0 });
  });
});
