import { describe, expect, it } from 'vitest';
import { STORE_KINDS, sleep, storeHarness } from '../testing/store-harness.js';
import { admission } from '../testing/store-steps.js';
import type { TaskFinish } from './task-lifecycle-store.js';

/** Task `id` admitted by `owner` with an owner lease of `ttlMs`, alone in its model's queue (so a dispatch never waits). */
const task = (id: string, owner: string, ttlMs = 10_000) => ({
  ...admission(id, owner, { group: id, ttlMs }),
  task: { id, owner, record: JSON.stringify({ id, model: 'm' }), ttlMs, lifetimeMs: 60_000 },
});
const end = (id: string, fence: number, outcome = '{}', retainMs = 60_000): TaskFinish => ({
  id,
  fence,
  outcome,
  retainMs,
  dequeue: true,
});

// Records, owner leases and fences: admitted with fence 1, taken over (`acquire`, `seize`) with a
// new one, renewed together, found when lapsed; the lifecycle's transitions name the fence.
describe.each(STORE_KINDS)('task ownership (%s store)', (kind) => {
  const h = storeHarness(kind);

  it('admitted once; dispatch is idempotent per task; requeue and dispatch again; end exactly once; any replica reads it', async () => {
    const [a, b] = await h.open(2);
    expect(await a!.lifecycle.admit(task('t1', 'A'))).toMatchObject({ kind: 'queued', fence: 1 });
    expect(await b!.lifecycle.admit(task('t1', 'B'))).toEqual({ kind: 'exists' });
    const d1 = await a!.lifecycle.dispatch('t1', 1, 'n1/p1');
    expect(d1).toMatchObject({
      kind: 'taken',
      task: { state: 'running', attempt: 1, placement: 'n1/p1', owner: 'A', fence: 1 },
    });
    // a redelivered dispatch (same owner, same fence) does not run the task twice
    expect(await a!.lifecycle.dispatch('t1', 1, 'n1/p2')).toEqual({ kind: 'absent' });
    const back = { id: 't1', fence: 1, entry: { lane: 'batch' as const, group: 't1', payload: 'A' } };
    expect(await a!.lifecycle.requeue(back)).toMatchObject({ ok: true, task: { state: 'queued', attempt: 1 } });
    expect(await a!.lifecycle.requeue(back)).toEqual({ ok: false, reason: 'state', state: 'queued' });
    expect(await a!.lifecycle.dispatch('t1', 1, 'n2/p1')).toMatchObject({
      kind: 'taken',
      task: { state: 'running', attempt: 2, placement: 'n2/p1' },
    });
    expect(await a!.lifecycle.finish(end('t1', 1, '{"end":true}'))).toMatchObject({
      record: { ok: true, task: { state: 'ended', outcome: '{"end":true}' } },
    });
    expect(await a!.lifecycle.finish(end('t1', 1, '{"end":"again"}'))).toMatchObject({
      record: { ok: false, reason: 'state', state: 'ended' },
    });
    expect(await b!.tasks.get('t1')).toMatchObject({
      id: 't1',
      state: 'ended',
      owner: 'A',
      attempt: 2,
      record: '{"id":"t1","model":"m"}',
      outcome: '{"end":true}',
    });
    expect(await b!.tasks.acquire('t1', 'B', 1000)).toEqual({ ok: false, reason: 'state', state: 'ended' });
    expect(await b!.tasks.get('nope')).toBeUndefined();
    expect(await b!.lifecycle.finish(end('nope', 1))).toMatchObject({ record: { ok: false, reason: 'unknown' } });
    expect(await b!.tasks.acquire('nope', 'B', 1000)).toEqual({ ok: false, reason: 'unknown' });
  });

  it('fencing: after a new owner takes the lease, the old owner can neither dispatch, end nor renew the task', async () => {
    const [a, b] = await h.open(2);
    await a!.lifecycle.admit(task('t1', 'A', 400));
    expect(await b!.tasks.acquire('t1', 'B', 10_000)).toMatchObject({ ok: false, reason: 'held', owner: 'A' });
    await sleep(500);
    const taken = await b!.tasks.acquire('t1', 'B', 10_000);
    expect(taken).toMatchObject({ ok: true, fence: 2 });
    expect(await a!.lifecycle.dispatch('t1', 1, 'n1/p1')).toEqual({
      kind: 'refused',
      refusal: { ok: false, reason: 'fenced', owner: 'B', fence: 2 },
    });
    expect(await a!.lifecycle.finish({ ...end('t1', 1, '{"stale":true}', 1000), dequeue: false })).toMatchObject({
      record: { ok: false, reason: 'fenced', owner: 'B', fence: 2 },
    });
    expect(await a!.tasks.renewMany([{ id: 't1', fence: 1 }], 10_000)).toEqual(['t1']);
    expect(await b!.lifecycle.dispatch('t1', 2, 'n1/p1')).toMatchObject({
      kind: 'taken',
      task: { owner: 'B', state: 'running' },
    });
    expect(await b!.lifecycle.finish(end('t1', 2, '{"by":"B"}'))).toMatchObject({ record: { ok: true } });
    expect(await a!.tasks.get('t1')).toMatchObject({ state: 'ended', outcome: '{"by":"B"}', owner: 'B', fence: 2 });
  });

  it('a lapsed lease fences its own holder until it acquires again (new fence); a renewal keeps it', async () => {
    const [a] = await h.open(1);
    await a!.lifecycle.admit(task('t1', 'A', 400));
    await sleep(150);
    expect(await a!.tasks.renewMany([{ id: 't1', fence: 1 }], 400)).toEqual([]);
    await sleep(150);
    expect(await a!.lifecycle.dispatch('t1', 1, 'n1/p1')).toMatchObject({ kind: 'taken' });
    await sleep(500);
    expect(await a!.lifecycle.finish(end('t1', 1, '{}', 1000))).toMatchObject({
      record: { ok: false, reason: 'fenced', fence: 1 },
    });
    expect(await a!.tasks.acquire('t1', 'A', 10_000)).toMatchObject({ ok: true, fence: 2 });
    expect(await a!.lifecycle.finish(end('t1', 2, '{}', 1000))).toMatchObject({ record: { ok: true } });
  });

  it('of 3 replicas racing for an orphaned task, exactly one becomes its owner', async () => {
    const clients = await h.open(3);
    await clients[0]!.lifecycle.admit(task('orphan', 'dead', 50));
    await sleep(100);
    const r = await Promise.all(clients.map((c, i) => c.tasks.acquire('orphan', `R${i}`, 10_000)));
    const winners = r.filter((x) => x.ok);
    expect(winners).toHaveLength(1);
    expect(r.filter((x) => !x.ok)).toEqual(expect.arrayContaining([expect.objectContaining({ reason: 'held' })]));
    expect(winners[0]).toMatchObject({ fence: 2 });
  });

  it('seize: on evidence its owner died, a live lease is taken by exactly one of 3 replicas, only from the owner and fence they saw', async () => {
    const clients = await h.open(3);
    await clients[0]!.lifecycle.admit(task('t1', 'dead', 60_000));
    // the lease is live: acquire waits for it, seize does not
    expect(await clients[1]!.tasks.acquire('t1', 'R1', 10_000)).toMatchObject({
      ok: false,
      reason: 'held',
      owner: 'dead',
    });
    const r = await Promise.all(
      clients.map((c, i) =>
        c.tasks.seize(
          't1',
          { owner: 'dead', fence: 1 },
          `R${i}`,
          10_000,
          JSON.stringify({ owner_url: `http://r${i}` }),
        ),
      ),
    );
    const winners = r.filter((x) => x.ok);
    expect(winners).toHaveLength(1);
    expect(winners[0]).toMatchObject({ fence: 2 });
    const winner = `R${r.findIndex((x) => x.ok)}`;
    expect(r.filter((x) => !x.ok)).toEqual([
      { ok: false, reason: 'fenced', owner: winner, fence: 2 },
      { ok: false, reason: 'fenced', owner: winner, fence: 2 },
    ]);
    expect(await clients[0]!.tasks.get('t1')).toMatchObject({
      owner: winner,
      fence: 2,
      record: JSON.stringify({ owner_url: `http://r${winner.slice(1)}` }),
    });
    // the old owner is fenced; the new one holds a live lease (no orphan)
    expect(await clients[0]!.lifecycle.finish(end('t1', 1, '{}', 1000))).toMatchObject({
      record: { ok: false, reason: 'fenced', owner: winner },
    });
    expect(await clients[0]!.tasks.lapsed(16)).toEqual([]);
    // a stale view (the owner it saw holds it no longer, or under another fence) takes nothing
    expect(await clients[1]!.tasks.seize('t1', { owner: winner, fence: 1 }, 'R9', 10_000)).toMatchObject({
      ok: false,
      reason: 'fenced',
      owner: winner,
      fence: 2,
    });
    expect(await clients[Number(winner.slice(1))]!.lifecycle.finish(end('t1', 2))).toMatchObject({
      record: { ok: true },
    });
    expect(await clients[1]!.tasks.seize('t1', { owner: winner, fence: 2 }, 'R9', 10_000)).toEqual({
      ok: false,
      reason: 'state',
      state: 'ended',
    });
    expect(await clients[1]!.tasks.seize('nope', { owner: 'dead', fence: 1 }, 'R9', 10_000)).toEqual({
      ok: false,
      reason: 'unknown',
    });
  });

  it('renewMany keeps every lease of an owner in one call and names the tasks it lost; lapsed lists the orphans, not ended ones', async () => {
    const [a, b] = await h.open(2);
    for (const id of ['r1', 'r2', 'r3', 'gone']) await a!.lifecycle.admit(task(id, 'A', 300));
    await a!.lifecycle.finish(end('r3', 1));
    await sleep(150);
    // r1 and r2 renewed; r3 ended (left out); 'nope' unknown (left out)
    expect(
      await a!.tasks.renewMany(
        [
          { id: 'r1', fence: 1 },
          { id: 'r2', fence: 1 },
          { id: 'r3', fence: 1 },
          { id: 'nope', fence: 1 },
        ],
        10_000,
      ),
    ).toEqual([]);
    await sleep(250);
    // 'gone' lapsed: an orphan; the renewed ones are not
    expect(await b!.tasks.lapsed(16)).toEqual(['gone']);
    const taken = await b!.tasks.acquire('gone', 'B', 10_000, JSON.stringify({ owner_url: 'http://b' }));
    expect(taken).toMatchObject({ ok: true, fence: 2 });
    expect(await b!.tasks.get('gone')).toMatchObject({ owner: 'B', record: '{"owner_url":"http://b"}' });
    expect(await b!.tasks.lapsed(16)).toEqual([]);
    // A's stale fence for 'gone' is refused; r1 with a wrong fence too
    expect(
      await a!.tasks.renewMany(
        [
          { id: 'gone', fence: 1 },
          { id: 'r1', fence: 7 },
          { id: 'r2', fence: 1 },
        ],
        10_000,
      ),
    ).toEqual(['gone', 'r1']);
    expect(await a!.tasks.renewMany([], 10_000)).toEqual([]);
    // limit, oldest lapse first
    await a!.lifecycle.admit(task('o1', 'A', 50));
    await sleep(20);
    await a!.lifecycle.admit(task('o2', 'A', 50));
    await sleep(120);
    expect(await b!.tasks.lapsed(1)).toEqual(['o1']);
    expect(await b!.tasks.lapsed(16)).toEqual(['o1', 'o2']);
  });

  it('an ended task is forgotten after its retention; an unended one after its lifetime', async () => {
    const [a, b] = await h.open(2);
    await a!.lifecycle.admit(task('ends', 'A'));
    await a!.lifecycle.finish(end('ends', 1, '{}', 300));
    await a!.lifecycle.admit({
      ...task('never-ends', 'A'),
      task: { ...task('never-ends', 'A').task, lifetimeMs: 300 },
    });
    expect(await b!.tasks.get('ends')).toBeDefined();
    expect(await b!.tasks.get('never-ends')).toBeDefined();
    await sleep(450);
    expect(await b!.tasks.get('ends')).toBeUndefined();
    expect(await b!.tasks.get('never-ends')).toBeUndefined();
    // the id is free again
    expect(await b!.lifecycle.admit(task('ends', 'B'))).toMatchObject({ kind: 'queued', fence: 1 });
  });
});
