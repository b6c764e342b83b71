import { describe, expect, it } from 'vitest';
import type { QueueLane } from './admission-queue-store.js';
import type { ClusterSignal } from './cluster-signals.js';
import type { TaskAdmit } from './task-lifecycle-store.js';
import { STORE_KINDS, sleep, storeHarness } from '../testing/store-harness.js';
import { admissionView } from '../testing/store-steps.js';

const admit = (
  id: string,
  owner: string,
  o: { lane?: QueueLane; group?: string; session?: string; ttlMs?: number } = {},
): TaskAdmit => ({
  task: { id, owner, record: JSON.stringify({ id }), ttlMs: o.ttlMs ?? 10_000, lifetimeMs: 60_000 },
  entry: { lane: o.lane ?? 'batch', group: o.group ?? 'm', payload: owner, deadlineMs: 60_000 },
  sessionId: o.session ?? `s-${id}`,
});

const pool = { node_id: 'n1', pool_id: 'p1' };

describe.each(STORE_KINDS)('task lifecycle (%s store)', (kind) => {
  const h = storeHarness(kind);

  it('admit writes the record (fence 1), the entry and the session turn together; a taken id changes nothing', async () => {
    const [a, b] = await h.open(2, { session_token_budget: 100 });
    const first = await a!.lifecycle.admit(admit('t1', 'A', { session: 's1' }));
    expect(first).toMatchObject({
      kind: 'queued',
      position: 0,
      fence: 1,
      view: { ahead: 0, lastPool: undefined, budgetRemaining: 100 },
    });
    expect(first.kind === 'queued' && first.evicted).toBeFalsy();
    expect(await b!.tasks.get('t1')).toMatchObject({
      state: 'queued',
      owner: 'A',
      fence: 1,
      attempt: 0,
      record: '{"id":"t1"}',
    });
    expect(await h.queued(b!)).toEqual(['t1']);
    expect(await b!.sessions.get('s1')).toMatchObject({ active_tasks: 1, turns: 0 });
    expect(await b!.lifecycle.admit(admit('i1', 'B', { lane: 'interactive', session: 's1' }))).toMatchObject({
      kind: 'queued',
      position: 0,
      view: { ahead: 0 },
    });
    // what a new entry of each lane would wait behind: the store's count, read in the admission's step
    expect(
      await b!.lifecycle.admit({ ...admit('i2', 'B', { lane: 'interactive', session: 's1' }), maxAhead: 0 }),
    ).toMatchObject({ kind: 'late', view: { ahead: 1 } });
    expect(await b!.lifecycle.admit({ ...admit('b2', 'B', { session: 's1' }), maxAhead: 1 })).toMatchObject({
      kind: 'late',
      view: { ahead: 2 },
    });
    expect(await b!.sessions.get('s1')).toMatchObject({ active_tasks: 2 });
    // the same id again, from any replica: nothing changes (no second turn, no second entry)
    expect(await b!.lifecycle.admit(admit('t1', 'B', { session: 's1' }))).toEqual({ kind: 'exists' });
    // an id with a record but no entry (dispatched), or an entry but no record (it expired: its lifetime passed)
    await a!.lifecycle.admit(admit('rec-only', 'A', { group: 'r' }));
    expect(await a!.lifecycle.dispatch('rec-only', 1, 'n1/p1')).toMatchObject({ kind: 'taken' });
    await a!.lifecycle.admit({
      ...admit('entry-only', 'A'),
      task: { ...admit('entry-only', 'A').task, lifetimeMs: 50 },
    });
    await sleep(100);
    expect(await b!.lifecycle.admit(admit('rec-only', 'B', { session: 's1' }))).toEqual({ kind: 'exists' });
    expect(await b!.lifecycle.admit(admit('entry-only', 'B', { session: 's1' }))).toEqual({ kind: 'exists' });
    expect(await a!.sessions.get('s1')).toMatchObject({ active_tasks: 2 });
    expect(await a!.queue.sizes()).toEqual({ interactive: 1, batch: 2 });
    expect(await a!.tasks.get('entry-only')).toBeUndefined();
  });

  it('a full queue writes nothing (reject); drop-lru evicts the oldest batch entry and says so', async () => {
    const [a, b] = await h.open(2, { admission_capacity: 2, admission_policy: 'reject' });
    await a!.lifecycle.admit(admit('t1', 'A'));
    await b!.lifecycle.admit(admit('t2', 'B'));
    expect(await a!.lifecycle.admit(admit('t3', 'A', { session: 'full' }))).toMatchObject({
      kind: 'full',
      policy: 'reject',
      view: { ahead: 2 },
    });
    expect(await b!.tasks.get('t3')).toBeUndefined();
    expect(await b!.sessions.get('full')).toBeUndefined();
    expect(await h.queued(b!)).toEqual(['t1', 't2']);

    const [c, d] = await h.open(2, { admission_capacity: 2, admission_policy: 'drop-lru' });
    await c!.lifecycle.admit(admit('b1', 'C'));
    await d!.lifecycle.admit(admit('b2', 'D'));
    const added = await d!.lifecycle.admit(admit('i1', 'D', { lane: 'interactive' }));
    expect(added).toMatchObject({
      kind: 'queued',
      position: 0,
      fence: 1,
      evicted: { id: 'b1', lane: 'batch', group: 'm', payload: 'C' },
    });
    expect(await c!.queue.gone(['b1', 'b2'])).toEqual([{ id: 'b1', evicted: true }]);
    // the victim's record is its owner's to end
    expect(await c!.tasks.get('b1')).toMatchObject({ state: 'queued', owner: 'C' });
    await d!.lifecycle.admit(admit('i2', 'D', { lane: 'interactive' }));
    expect(await c!.lifecycle.admit(admit('i3', 'C', { lane: 'interactive', session: 'none-left' }))).toMatchObject({
      kind: 'full',
      policy: 'drop-lru',
      view: { ahead: 2 },
    });
    expect(await c!.tasks.get('i3')).toBeUndefined();
    expect(await c!.sessions.get('none-left')).toBeUndefined();
  });

  it('10 concurrent admissions from 3 replicas into a capacity of 3 (reject): exactly 3 records, entries and turns', async () => {
    const clients = await h.open(3, { admission_capacity: 3, admission_policy: 'reject' });
    const r = await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        clients[i % 3]!.lifecycle.admit(admit(`t${i}`, `R${i % 3}`, { session: 'shared' })),
      ),
    );
    const queued = r.map((x, i) => ({ x, id: `t${i}` })).filter(({ x }) => x.kind === 'queued');
    expect(queued).toHaveLength(3);
    expect(r.filter((x) => x.kind === 'full')).toHaveLength(7);
    const records = await Promise.all(Array.from({ length: 10 }, (_, i) => clients[0]!.tasks.get(`t${i}`)));
    expect(records.filter((t) => t !== undefined).map((t) => t!.id)).toEqual(queued.map((q) => q.id));
    expect(await clients[1]!.sessions.get('shared')).toMatchObject({ active_tasks: 3 });
  });

  it('a task behind others passes them when the pool it leased has a free slot for each of them, and only then', async () => {
    const [a, b] = await h.open(2);
    await a!.lifecycle.admit(admit('i1', 'A', { lane: 'interactive' }));
    await a!.lifecycle.admit(admit('b1', 'A'));
    await b!.lifecycle.admit(admit('b2', 'B'));
    const lease = (id: string, slots: number) =>
      b!.leases.acquire({ poolKey: 'n1/p1', slots, leaseId: id, ttlMs: 10_000 });
    // b2 has 2 ahead (i1, then b1 in the batch lane). With its own lease, 3 slots leave 2 free: it may pass them.
    await lease('b2#1', 3);
    expect(await b!.lifecycle.dispatch('b2', 1, 'n1/p1', { poolKey: 'n1/p1', slots: 3 })).toMatchObject({
      kind: 'taken',
      task: { state: 'running' },
    });
    expect(await h.queued(a!)).toEqual(['i1', 'b1']);
    // b1 has 1 ahead (i1); its own lease and b2's leave 3 − 2 = 1 free: it passes; no room given, it would not
    await a!.lifecycle.admit(admit('b3', 'A'));
    await lease('b1#1', 3);
    expect(await a!.lifecycle.dispatch('b1', 1, 'n1/p1')).toEqual({ kind: 'behind', first: 'i1' });
    expect(await a!.lifecycle.dispatch('b1', 1, 'n1/p1', { poolKey: 'n1/p1', slots: 3 })).toMatchObject({
      kind: 'taken',
    });
    // b3 has 1 ahead (i1) and the pool no free slot after its own lease: i1 would wait for the slot b3 took
    expect(await b!.leases.acquire({ poolKey: 'n1/p2', slots: 1, leaseId: 'b3#1', ttlMs: 10_000 })).toMatchObject({
      kind: 'granted',
    });
    expect(await a!.lifecycle.dispatch('b3', 1, 'n1/p2', { poolKey: 'n1/p2', slots: 1 })).toEqual({
      kind: 'behind',
      first: 'i1',
    });
    expect(await a!.tasks.get('b3')).toMatchObject({ state: 'queued', attempt: 0 });
    // a lapsed lease is not counted: b3 on a 2-slot pool whose other lease lapsed passes (the lease
    // outlives the next two round trips by far even on a loaded machine, then lapses)
    await b!.leases.acquire({ poolKey: 'n1/p3', slots: 2, leaseId: 'gone#1', ttlMs: 500 });
    await b!.leases.acquire({ poolKey: 'n1/p3', slots: 2, leaseId: 'b3#2', ttlMs: 10_000 });
    expect(await a!.lifecycle.dispatch('b3', 1, 'n1/p3', { poolKey: 'n1/p3', slots: 2 })).toEqual({
      kind: 'behind',
      first: 'i1',
    });
    await sleep(600);
    expect(await a!.lifecycle.dispatch('b3', 1, 'n1/p3', { poolKey: 'n1/p3', slots: 2 })).toMatchObject({
      kind: 'taken',
    });
  });

  it('replicas passing at once never take the slots the tasks ahead of them need', async () => {
    const [a, b, c] = await h.open(3);
    for (const id of ['h1', 'h2']) await a!.lifecycle.admit(admit(id, 'A'));
    const behind = ['b1', 'c1', 'b2', 'c2', 'b3', 'c3'];
    const replica = (id: string) => (id.startsWith('b') ? b! : c!);
    for (const id of behind) await replica(id).lifecycle.admit(admit(id, id.slice(0, 1).toUpperCase()));
    const room = { poolKey: 'n1/p1', slots: 5 };
    // each claims as the gate does: the slot lease, then the take; a task that may not go gives its lease back
    const claim = async (id: string): Promise<boolean> => {
      const s = replica(id);
      if (
        (await s.leases.acquire({ poolKey: room.poolKey, slots: room.slots, leaseId: `${id}#1`, ttlMs: 10_000 }))
          .kind !== 'granted'
      )
        return false;
      const r = await s.lifecycle.dispatch(id, 1, 'n1/p1', room);
      if (r.kind !== 'taken') await s.leases.release(room.poolKey, `${id}#1`);
      return r.kind === 'taken';
    };
    const raced = await Promise.all(behind.map(claim));
    // h1 and h2 are ahead of all of them and still queued: the pool keeps a slot for each
    expect(5 - (await a!.leases.list(room.poolKey)).length).toBeGreaterThanOrEqual(2);
    // the rest try again in order: exactly the 3 slots h1 and h2 do not need are taken
    for (const [i, id] of behind.entries()) if (!raced[i]) await claim(id);
    expect(await a!.leases.list(room.poolKey)).toHaveLength(3);
    expect((await h.queued(a!)).slice(0, 2)).toEqual(['h1', 'h2']);
  });

  it('dispatch takes the entry and moves the record to running together, only for the first of its model and the current fence', async () => {
    const [a, b] = await h.open(2);
    await a!.lifecycle.admit(admit('b1', 'A'));
    await b!.lifecycle.admit(admit('i1', 'B', { lane: 'interactive' }));
    // behind: nothing changes
    expect(await a!.lifecycle.dispatch('b1', 1, 'n1/p1')).toEqual({ kind: 'behind', first: 'i1' });
    expect(await a!.tasks.get('b1')).toMatchObject({ state: 'queued', attempt: 0 });
    const taken = await b!.lifecycle.dispatch('i1', 1, 'n1/p1');
    expect(taken).toMatchObject({
      kind: 'taken',
      entry: { id: 'i1', lane: 'interactive', payload: 'B' },
      task: { state: 'running', attempt: 1, placement: 'n1/p1', fence: 1 },
    });
    expect(await h.queued(a!)).toEqual(['b1']);
    // a redelivered dispatch finds no entry: it never runs twice
    expect(await b!.lifecycle.dispatch('i1', 1, 'n1/p2')).toEqual({ kind: 'absent' });
    // a stale fence: refused, the entry stays where it was
    expect(await a!.lifecycle.dispatch('b1', 7, 'n1/p1')).toEqual({
      kind: 'refused',
      refusal: { ok: false, reason: 'fenced', owner: 'A', fence: 1 },
    });
    expect(await h.queued(b!)).toEqual(['b1']);
    // an entry whose record ended without it (a finish that did not dequeue): refused on state
    await b!.lifecycle.admit(admit('e1', 'B', { lane: 'interactive' }));
    await b!.lifecycle.finish({ id: 'e1', fence: 1, outcome: '{}', retainMs: 60_000, dequeue: false });
    expect(await b!.lifecycle.dispatch('e1', 1, 'n1/p1')).toEqual({
      kind: 'refused',
      refusal: { ok: false, reason: 'state', state: 'ended' },
    });
    expect(await h.queued(b!)).toEqual(['e1', 'b1']);
    await b!.queue.remove('e1');
    // an entry without a record (its lifetime passed, or the store lost it)
    await b!.lifecycle.admit({
      ...admit('bare', 'B', { lane: 'interactive', group: 'x' }),
      task: { ...admit('bare', 'B').task, lifetimeMs: 50 },
    });
    await sleep(100);
    expect(await a!.lifecycle.dispatch('bare', 1, 'n1/p1')).toEqual({
      kind: 'refused',
      refusal: { ok: false, reason: 'unknown' },
    });
    expect(await a!.lifecycle.dispatch('b1', 1, 'n1/p1')).toMatchObject({ kind: 'taken', task: { state: 'running' } });
  });

  it('requeue moves the record back to queued and its entry to the head of its lane, past the capacity, together; refused, nothing changes', async () => {
    const [a, b] = await h.open(2, { admission_capacity: 2 });
    await a!.lifecycle.admit(admit('r1', 'A', { ttlMs: 300 }));
    expect(await a!.lifecycle.dispatch('r1', 1, 'n1/p1')).toMatchObject({ kind: 'taken' });
    await b!.lifecycle.admit(admit('w1', 'B'));
    await b!.lifecycle.admit(admit('w2', 'B'));
    const back = {
      id: 'r1',
      fence: 1,
      entry: { lane: 'batch' as const, group: 'm', payload: 'A', deadlineMs: 60_000 },
    };
    expect(await a!.lifecycle.requeue(back)).toMatchObject({
      ok: true,
      task: { state: 'queued', attempt: 1, placement: 'n1/p1', fence: 1, owner: 'A' },
    });
    expect(await h.queued(b!)).toEqual(['r1', 'w1', 'w2']);
    // not running: refused on state, the entry stays where it is
    expect(await a!.lifecycle.requeue(back)).toEqual({ ok: false, reason: 'state', state: 'queued' });
    expect(await h.queued(b!)).toEqual(['r1', 'w1', 'w2']);
    // dispatched again, then taken over by B: A's requeue is refused and puts nothing back
    expect(await a!.lifecycle.dispatch('r1', 1, 'n1/p2')).toMatchObject({ kind: 'taken', task: { attempt: 2 } });
    await sleep(400);
    expect(await b!.tasks.acquire('r1', 'B', 10_000)).toMatchObject({ ok: true, fence: 2 });
    expect(await a!.lifecycle.requeue(back)).toEqual({ ok: false, reason: 'fenced', owner: 'B', fence: 2 });
    expect(await h.queued(b!)).toEqual(['w1', 'w2']);
    expect(await b!.tasks.get('r1')).toMatchObject({ state: 'running', owner: 'B', fence: 2, attempt: 2 });
    expect(await a!.lifecycle.requeue({ ...back, id: 'nope' })).toEqual({ ok: false, reason: 'unknown' });
    expect(await h.queued(b!)).toEqual(['w1', 'w2']);
  });

  it('a replica whose lease was taken over can neither dispatch nor end the task', async () => {
    const [a, b] = await h.open(2);
    await a!.lifecycle.admit(admit('t1', 'A', { ttlMs: 300, session: 's1' }));
    await sleep(400);
    expect(await b!.tasks.acquire('t1', 'B', 10_000)).toMatchObject({ ok: true, fence: 2 });
    expect(await a!.lifecycle.dispatch('t1', 1, 'n1/p1')).toEqual({
      kind: 'refused',
      refusal: { ok: false, reason: 'fenced', owner: 'B', fence: 2 },
    });
    const stale = await a!.lifecycle.finish({
      id: 't1',
      fence: 1,
      outcome: '{"stale":true}',
      retainMs: 60_000,
      dequeue: false,
    });
    expect(stale).toEqual({ record: { ok: false, reason: 'fenced', owner: 'B', fence: 2 }, dequeued: false });
    expect(await b!.tasks.get('t1')).toMatchObject({ state: 'queued', owner: 'B' });
    expect(await b!.lifecycle.dispatch('t1', 2, 'n2/p1')).toMatchObject({
      kind: 'taken',
      task: { owner: 'B', fence: 2, attempt: 1 },
    });
  });

  it('a spent budget and too many ahead refuse the admission and write nothing, before a taken id is looked at', async () => {
    const [a, b] = await h.open(2, { session_token_budget: 10 });
    await a!.lifecycle.admit(admit('t1', 'A', { session: 's1' }));
    await a!.lifecycle.dispatch('t1', 1, 'n1/p1');
    await a!.lifecycle.finish({
      id: 't1',
      fence: 1,
      outcome: '{}',
      retainMs: 60_000,
      dequeue: false,
      session: { id: 's1', tokensOut: 10 },
    });
    const spent = await b!.lifecycle.admit(admit('t2', 'B', { session: 's1' }));
    expect(spent).toEqual({ kind: 'spent', view: { ahead: 0, lastPool: undefined, budgetRemaining: 0 } });
    // the budget is checked before the id: the same refusal for a taken one
    expect(await b!.lifecycle.admit(admit('t1', 'B', { session: 's1' }))).toMatchObject({ kind: 'spent' });
    await a!.lifecycle.admit(admit('w1', 'A'));
    expect(await b!.lifecycle.admit({ ...admit('t3', 'B', { session: 's3' }), maxAhead: 0 })).toEqual({
      kind: 'late',
      view: { ahead: 1, lastPool: undefined, budgetRemaining: 10 },
    });
    expect(await b!.lifecycle.admit({ ...admit('w1', 'B', { session: 's3' }), maxAhead: -1 })).toMatchObject({
      kind: 'late',
    });
    for (const id of ['t2', 't3']) expect(await a!.tasks.get(id)).toBeUndefined();
    expect(await h.queued(a!)).toEqual(['w1']);
    expect(await a!.sessions.get('s1')).toMatchObject({ active_tasks: 0, tokens_out: 10 });
    expect(await a!.sessions.get('s3')).toBeUndefined();
    expect(await b!.lifecycle.admit({ ...admit('t4', 'B', { session: 's3' }), maxAhead: 1 })).toMatchObject({
      kind: 'queued',
      position: 1,
      view: { ahead: 1 },
    });
  });

  it('finish ends the record, takes a queued entry out and counts the session turn in one step; exactly once', async () => {
    const [a, b] = await h.open(2, { session_token_budget: 100 });
    await a!.lifecycle.admit(admit('run', 'A', { session: 's1' }));
    await a!.lifecycle.admit(admit('wait', 'A', { session: 's1' }));
    await a!.lifecycle.dispatch('run', 1, 'n1/p1');
    const ended = await a!.lifecycle.finish({
      id: 'run',
      fence: 1,
      outcome: '{"end":1}',
      retainMs: 60_000,
      dequeue: false,
      session: { id: 's1', tokensOut: 30, pool },
    });
    expect(ended).toMatchObject({
      record: { ok: true, task: { state: 'ended', outcome: '{"end":1}', attempt: 1 } },
      dequeued: false,
    });
    expect(await b!.sessions.get('s1')).toMatchObject({ turns: 1, tokens_out: 30, active_tasks: 1 });
    expect(await b!.lifecycle.admit({ ...admit('late', 'B', { session: 's1' }), maxAhead: 0 })).toEqual({
      kind: 'late',
      view: { ahead: 1, lastPool: pool, budgetRemaining: 70 },
    });
    // a queued task cancelled: out of the queue, its turn closed without counting
    const cancelled = await a!.lifecycle.finish({
      id: 'wait',
      fence: 1,
      outcome: '{"cancel":1}',
      retainMs: 60_000,
      dequeue: true,
      session: { id: 's1', tokensOut: undefined },
    });
    expect(cancelled).toMatchObject({ record: { ok: true, task: { state: 'ended' } }, dequeued: true });
    expect(await b!.queue.sizes()).toEqual({ interactive: 0, batch: 0 });
    expect(await b!.sessions.get('s1')).toMatchObject({ turns: 1, tokens_out: 30, active_tasks: 0 });
    expect((await admissionView(b!, 's1')).lastPool).toEqual(pool);
    // a second end changes nothing in the record
    const again = await a!.lifecycle.finish({
      id: 'run',
      fence: 1,
      outcome: '{"end":2}',
      retainMs: 60_000,
      dequeue: true,
    });
    expect(again).toEqual({ record: { ok: false, reason: 'state', state: 'ended' }, dequeued: false });
    expect(await b!.tasks.get('run')).toMatchObject({ outcome: '{"end":1}' });
    // unknown task (its record expired, or the store lost it): the turn still closes, and an entry left behind goes
    await a!.lifecycle.admit({
      ...admit('lost', 'A', { session: 's2' }),
      task: { ...admit('lost', 'A').task, lifetimeMs: 50 },
    });
    await sleep(100);
    const lost = await a!.lifecycle.finish({
      id: 'lost',
      fence: 1,
      outcome: '{}',
      retainMs: 1000,
      dequeue: true,
      session: { id: 's2', tokensOut: undefined },
    });
    expect(lost).toEqual({ record: { ok: false, reason: 'unknown' }, dequeued: true });
    expect(await b!.sessions.get('s2')).toMatchObject({ active_tasks: 0 });
  });

  it('an ended record is kept for its retention, then forgotten', async () => {
    const [a, b] = await h.open(2);
    await a!.lifecycle.admit(admit('t1', 'A'));
    await a!.lifecycle.finish({ id: 't1', fence: 1, outcome: '{}', retainMs: 300, dequeue: true });
    expect(await b!.tasks.get('t1')).toMatchObject({ state: 'ended' });
    await sleep(450);
    expect(await b!.tasks.get('t1')).toBeUndefined();
    expect(await b!.lifecycle.admit(admit('t1', 'B'))).toMatchObject({ kind: 'queued', fence: 1 });
  });

  it('signals: admit, dispatch and a dequeuing finish that change the model’s first entry while others wait name it; others are silent', async () => {
    const [a, b] = await h.open(2);
    const heard: ClusterSignal[] = [];
    b!.signals.subscribe((s) => heard.push(s));
    for (let i = 0; heard.length === 0 && i < 100; i += 1) {
      await a!.leases.acquire({ poolKey: 'probe', slots: 1, leaseId: `p${i}`, ttlMs: 10_000 });
      await a!.leases.release('probe', `p${i}`);
      await sleep(20);
    }
    await sleep(50);
    heard.length = 0;
    await a!.lifecycle.admit(admit('b1', 'A')); // the first of an empty model: no signal
    await a!.lifecycle.admit(admit('b2', 'A')); // behind b1: no signal
    await b!.lifecycle.admit(admit('i1', 'B', { lane: 'interactive' }));
    await b!.lifecycle.dispatch('i1', 1, 'n1/p1');
    await b!.lifecycle.requeue({ id: 'i1', fence: 1, entry: { lane: 'interactive', group: 'm', payload: 'B' } }); // back first
    await b!.lifecycle.dispatch('i1', 1, 'n1/p1');
    await a!.lifecycle.finish({ id: 'b1', fence: 1, outcome: '{}', retainMs: 1000, dequeue: true });
    await a!.lifecycle.finish({ id: 'i1', fence: 1, outcome: '{}', retainMs: 1000, dequeue: true }); // not queued: no signal
    await a!.lifecycle.finish({ id: 'b2', fence: 1, outcome: '{}', retainMs: 1000, dequeue: true }); // the last: no signal
    const end = Date.now() + 3000;
    while (heard.length < 5 && Date.now() < end) await sleep(10);
    await sleep(50);
    expect(heard).toEqual([
      { kind: 'queue', group: 'm', head: 'i1', headPayload: 'B' },
      { kind: 'queue', group: 'm', head: 'b1', headPayload: 'A' },
      { kind: 'queue', group: 'm', head: 'i1', headPayload: 'B' },
      { kind: 'queue', group: 'm', head: 'b1', headPayload: 'A' },
      { kind: 'queue', group: 'm', head: 'b2', headPayload: 'A' },
    ]);
  });

  it('seizeQueued: of 3 replicas that found a replica dead at once, one gets all its queued tasks, in dispatch order; the rest is left alone', async () => {
    const [a, b, c] = await h.open(3);
    await a!.lifecycle.admit(admit('d-b1', 'dead'));
    await a!.lifecycle.admit(admit('live-b', 'A'));
    await a!.lifecycle.admit(admit('d-b2', 'dead'));
    await a!.lifecycle.admit(admit('d-i1', 'dead', { lane: 'interactive' }));
    await a!.lifecycle.admit(admit('d-run', 'dead', { group: 'other' }));
    // running (taken from the queue): not queued any more, left to the other ways
    expect(await a!.lifecycle.dispatch('d-run', 1, JSON.stringify(pool))).toMatchObject({ kind: 'taken' });
    const r = await Promise.all([a, b, c].map((x, i) => x!.lifecycle.seizeQueued('dead', `R${i}`, 10_000, 16)));
    const winners = r.filter((x) => x.length > 0);
    expect(winners).toHaveLength(1);
    expect(winners[0]).toEqual([
      { id: 'd-i1', fence: 2 },
      { id: 'd-b1', fence: 2 },
      { id: 'd-b2', fence: 2 },
    ]);
    const winner = `R${r.findIndex((x) => x.length > 0)}`;
    for (const id of ['d-i1', 'd-b1', 'd-b2'])
      expect(await a!.tasks.get(id)).toMatchObject({ owner: winner, fence: 2, state: 'queued' });
    expect(await a!.tasks.get('live-b')).toMatchObject({ owner: 'A', fence: 1 });
    expect(await a!.tasks.get('d-run')).toMatchObject({ owner: 'dead', fence: 1, state: 'running' });
    // their entries keep their places; the new owner holds live leases (no orphans)
    expect(await h.queued(a!)).toEqual(['d-i1', 'd-b1', 'live-b', 'd-b2']);
    expect(await a!.tasks.lapsed(16)).toEqual([]);
    expect(await b!.lifecycle.seizeQueued('dead', 'R9', 10_000, 16)).toEqual([]);
  });
});
