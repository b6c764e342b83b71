import { describe, expect, it } from 'vitest';
import { InvalidParamsError } from '../errors.js';
import { STORE_KINDS, sleep, storeHarness } from '../testing/store-harness.js';
import { TASK_RECORD_SCAN_LIMIT } from './task-record-query.js';
import type { TaskRecordEntry, TaskRecordQuery, TaskRecordStore } from './task-record-store.js';

const T0 = 1_700_000_000_000;
const LONG = 60_000;

const rec = (id: string, admittedAt: number, over: Partial<TaskRecordEntry> = {}): TaskRecordEntry => ({
  id,
  state: 'queued',
  model: 'chat',
  modelRef: 'llama-3-8b',
  priority: 'interactive',
  admittedAt,
  clientKey: undefined,
  owner: 'replica-a',
  body: JSON.stringify({ task_id: id }),
  ...over,
});

const ids = (entries: readonly TaskRecordEntry[]): string[] => entries.map((e) => e.id);

/** Every page of a query, following `next`; the ids in order and how many pages it took. */
async function allPages(
  store: TaskRecordStore,
  q: Omit<TaskRecordQuery, 'cursor'>,
): Promise<{ ids: string[]; pages: number }> {
  const out: string[] = [];
  let cursor: string | undefined;
  for (let pages = 1; pages < 1000; pages += 1) {
    const page = await store.list({ ...q, cursor });
    expect(page.entries.length).toBeLessThanOrEqual(q.limit);
    out.push(...ids(page.entries));
    if (page.next === undefined) return { ids: out, pages };
    cursor = page.next;
  }
  throw new Error('the list never ended');
}

/** `n` records admitted 1 ms apart from `from`, ids `<prefix>-0000`…, written in admission order. */
async function putMany(
  store: TaskRecordStore,
  prefix: string,
  n: number,
  from: number,
  over: Partial<TaskRecordEntry> = {},
): Promise<string[]> {
  const made = Array.from({ length: n }, (_, i) => rec(`${prefix}-${String(i).padStart(4, '0')}`, from + i, over));
  for (let i = 0; i < made.length; i += 200) await Promise.all(made.slice(i, i + 200).map((e) => store.put(e, LONG)));
  return ids(made);
}

describe.each(STORE_KINDS)('task records (%s store)', (kind) => {
  const h = storeHarness(kind);

  it('put, get and replace: every replica reads what any wrote', async () => {
    const [a, b] = await h.open(2);
    const first = rec('t1', T0, { clientKey: 'key-1' });
    await a!.taskRecords.put(first, LONG);
    expect(await b!.taskRecords.get('t1')).toStrictEqual(first);
    const ended = rec('t1', T0, { state: 'ended', owner: 'replica-b', body: '{"outcome":"ok"}' });
    await b!.taskRecords.put(ended, LONG);
    expect(await a!.taskRecords.get('t1')).toStrictEqual(ended);
    expect(await a!.taskRecords.get('t2')).toBeUndefined();
    expect(ids((await a!.taskRecords.list({ limit: 10 })).entries)).toEqual(['t1']);
  });

  it('an entry expires ttl after its last write', async () => {
    const [a] = await h.open(1);
    await a!.taskRecords.put(rec('short', T0 + 2), 150);
    await a!.taskRecords.put(rec('renewed', T0 + 1), 150);
    await a!.taskRecords.put(rec('kept', T0), LONG);
    await a!.taskRecords.put(rec('renewed', T0 + 1), LONG);
    expect(await a!.taskRecords.get('short')).toBeDefined();
    await sleep(250);
    expect(await a!.taskRecords.get('short')).toBeUndefined();
    expect(await a!.taskRecords.get('renewed')).toBeDefined();
    expect((await a!.taskRecords.list({ limit: 10 })).entries.map((e) => e.id)).toEqual(['renewed', 'kept']);
    expect(await a!.taskRecords.delete('short')).toBe(false);
  });

  it('past the retention count the oldest admitted go; a rewrite keeps its place', async () => {
    const [a, b] = await h.open(2, { task_retention_count: 3 });
    for (const i of [1, 2, 3, 4]) await a!.taskRecords.put(rec(`a${i}`, T0 + i), LONG);
    expect(await b!.taskRecords.get('a1')).toBeUndefined();
    expect(ids((await b!.taskRecords.list({ limit: 10 })).entries)).toEqual(['a4', 'a3', 'a2']);
    await b!.taskRecords.put(rec('a2', T0 + 2, { state: 'running' }), LONG);
    await a!.taskRecords.put(rec('a5', T0 + 5), LONG);
    expect(await b!.taskRecords.get('a2')).toBeUndefined();
    expect(ids((await a!.taskRecords.list({ limit: 10 })).entries)).toEqual(['a5', 'a4', 'a3']);
  });

  it('expired entries leave before live ones are trimmed', async () => {
    const [a] = await h.open(1, { task_retention_count: 3 });
    await a!.taskRecords.put(rec('old1', T0 + 1), LONG);
    await a!.taskRecords.put(rec('old2', T0 + 2), LONG);
    await a!.taskRecords.put(rec('brief', T0 + 3), 100);
    await sleep(200);
    await a!.taskRecords.put(rec('new1', T0 + 4), LONG);
    await a!.taskRecords.put(rec('new2', T0 + 5), LONG);
    // Had `brief` still counted, the bound would have taken old1 and then old2.
    expect(ids((await a!.taskRecords.list({ limit: 10 })).entries)).toEqual(['new2', 'new1', 'old2']);
  });

  it('lists newest admitted first, ties by id descending', async () => {
    const [a] = await h.open(1);
    for (const [id, at] of [
      ['m', T0 + 5],
      ['b', T0 + 7],
      ['a', T0 + 7],
      ['c', T0 + 7],
      ['z', T0],
    ] as const)
      await a!.taskRecords.put(rec(id, at), LONG);
    expect(ids((await a!.taskRecords.list({ limit: 10 })).entries)).toEqual(['c', 'b', 'a', 'm', 'z']);
    const first = await a!.taskRecords.list({ limit: 2 });
    expect(ids(first.entries)).toEqual(['c', 'b']);
    expect(ids((await a!.taskRecords.list({ limit: 10, cursor: first.next })).entries)).toEqual(['a', 'm', 'z']);
  });

  it('filters by state, model or its ref, priority, since and client key', async () => {
    const [a, b] = await h.open(2);
    await a!.taskRecords.put(rec('q1', T0 + 1, { clientKey: 'k1' }), LONG);
    await a!.taskRecords.put(rec('r1', T0 + 2, { state: 'running', clientKey: 'k2' }), LONG);
    await b!.taskRecords.put(rec('e1', T0 + 3, { state: 'ended', model: 'embed', modelRef: 'bge-small' }), LONG);
    await b!.taskRecords.put(rec('b1', T0 + 4, { priority: 'batch', modelRef: 'qwen-7b', clientKey: 'k1' }), LONG);
    const list = async (q: Omit<TaskRecordQuery, 'limit'>): Promise<string[]> =>
      ids((await a!.taskRecords.list({ limit: 10, ...q })).entries);
    expect(await list({})).toEqual(['b1', 'e1', 'r1', 'q1']);
    expect(await list({ state: 'queued' })).toEqual(['b1', 'q1']);
    expect(await list({ state: 'running' })).toEqual(['r1']);
    expect(await list({ state: 'ended' })).toEqual(['e1']);
    expect(await list({ model: 'chat' })).toEqual(['b1', 'r1', 'q1']);
    expect(await list({ model: 'llama-3-8b' })).toEqual(['r1', 'q1']);
    expect(await list({ model: 'bge-small' })).toEqual(['e1']);
    expect(await list({ model: 'nothing' })).toEqual([]);
    expect(await list({ priority: 'batch' })).toEqual(['b1']);
    expect(await list({ priority: 'interactive' })).toEqual(['e1', 'r1', 'q1']);
    expect(await list({ since: T0 + 3 })).toEqual(['b1', 'e1']);
    expect(await list({ since: T0 + 5 })).toEqual([]);
    // a client key lists its own entries only; none (an operator, or auth off) lists everyone's
    expect(await list({ clientKey: 'k1' })).toEqual(['b1', 'q1']);
    expect(await list({ clientKey: 'k2' })).toEqual(['r1']);
    expect(await list({ clientKey: 'k3' })).toEqual([]);
    expect(await list({ clientKey: 'k1', state: 'queued', model: 'chat', priority: 'interactive' })).toEqual(['q1']);
  });

  it('pages by cursor with no duplicate and no gap while newer tasks arrive', async () => {
    const [a, b] = await h.open(2);
    const older = await putMany(a!.taskRecords, 'old', 25, T0);
    const expected = [...older].reverse();
    const seen: string[] = [];
    let cursor: string | undefined;
    let pages = 0;
    do {
      const page = await b!.taskRecords.list({ limit: 10, cursor });
      seen.push(...ids(page.entries));
      cursor = page.next;
      pages += 1;
      // newer tasks between pages, one on the very millisecond of the newest entry already listed
      await a!.taskRecords.put(rec(`new-${pages}`, T0 + 1000 + pages), LONG);
      await a!.taskRecords.put(rec(`old-0024x${pages}`, T0 + 24), LONG);
    } while (cursor !== undefined);
    expect(seen).toEqual(expected);
    expect(pages).toBe(3);
    const fresh = await allPages(b!.taskRecords, { limit: 7 });
    expect(fresh.ids.slice(0, 3)).toEqual(['new-3', 'new-2', 'new-1']);
    expect(fresh.ids).toHaveLength(25 + 6);
    expect(new Set(fresh.ids).size).toBe(fresh.ids.length);
  });

  it('a full last page ends the list; a cursor it never wrote is refused', async () => {
    const [a] = await h.open(1);
    await putMany(a!.taskRecords, 'x', 10, T0);
    const page = await a!.taskRecords.list({ limit: 10 });
    expect(page.entries).toHaveLength(10);
    expect(page.next).toBeUndefined();
    const half = await a!.taskRecords.list({ limit: 5 });
    expect(half.next).toBeDefined();
    expect(ids((await a!.taskRecords.list({ limit: 5, cursor: half.next })).entries)).toEqual(
      ids(page.entries.slice(5)),
    );
    await expect(a!.taskRecords.list({ limit: 5, cursor: 'not-a-cursor' })).rejects.toBeInstanceOf(InvalidParamsError);
  });

  it('pages through more entries of one millisecond than a read holds', async () => {
    const [a] = await h.open(1);
    // More ties than the Redis store's largest read (500): a page past the first has to read on
    // past the members of the cursor's millisecond it already listed.
    const made = Array.from({ length: 600 }, (_, i) => rec(`tie-${String(i).padStart(3, '0')}`, T0));
    for (let i = 0; i < made.length; i += 200)
      await Promise.all(made.slice(i, i + 200).map((e) => a!.taskRecords.put(e, LONG)));
    const { ids: listed, pages } = await allPages(a!.taskRecords, { limit: 100 });
    expect(listed).toEqual(ids(made).reverse());
    expect(pages).toBe(6);
  });

  it('stops after a bounded scan and answers next; the next call goes on from there', async () => {
    const [a] = await h.open(1);
    const wanted = await putMany(a!.taskRecords, 'interactive', 2, T0);
    await putMany(a!.taskRecords, 'batch', TASK_RECORD_SCAN_LIMIT + 5, T0 + 10, { priority: 'batch' });
    const first = await a!.taskRecords.list({ priority: 'interactive', limit: 10 });
    expect(first.entries).toEqual([]);
    expect(first.next).toBeDefined();
    const second = await a!.taskRecords.list({ priority: 'interactive', limit: 10, cursor: first.next });
    expect(ids(second.entries)).toEqual([...wanted].reverse());
    expect(second.next).toBeUndefined();
  });

  it('entries that expired cost a list once: it drops them from what the next one scans', async () => {
    const [a] = await h.open(1);
    await a!.taskRecords.put(rec('older', T0), LONG);
    const brief = Array.from({ length: TASK_RECORD_SCAN_LIMIT }, (_, i) => rec(`brief-${i}`, T0 + 10 + i));
    for (let i = 0; i < brief.length; i += 200)
      await Promise.all(brief.slice(i, i + 200).map((e) => a!.taskRecords.put(e, 300)));
    await sleep(400);
    // The first call may spend its scan on the expired ones (Redis reads their index members)…
    const first = await a!.taskRecords.list({ limit: 10 });
    if (first.entries.length === 0) expect(first.next).toBeDefined();
    else expect(ids(first.entries)).toEqual(['older']);
    // …but not the next one from the start.
    const again = await a!.taskRecords.list({ limit: 10 });
    expect(ids(again.entries)).toEqual(['older']);
    expect(again.next).toBeUndefined();
  });

  it('delete removes the entry once, from reads and lists alike', async () => {
    const [a, b] = await h.open(2);
    await a!.taskRecords.put(rec('d1', T0 + 1), LONG);
    await a!.taskRecords.put(rec('d2', T0 + 2), LONG);
    expect(await b!.taskRecords.delete('d1')).toBe(true);
    expect(await b!.taskRecords.delete('d1')).toBe(false);
    expect(await a!.taskRecords.delete('never')).toBe(false);
    expect(await a!.taskRecords.get('d1')).toBeUndefined();
    expect(ids((await a!.taskRecords.list({ limit: 10 })).entries)).toEqual(['d2']);
    // written again after its delete, it is back in its place
    await a!.taskRecords.put(rec('d1', T0 + 1), LONG);
    expect(ids((await b!.taskRecords.list({ limit: 10 })).entries)).toEqual(['d2', 'd1']);
  });
});
