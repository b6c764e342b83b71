import { describe, expect, it } from 'vitest';
import { STORE_KINDS, sleep, storeHarness } from '../testing/store-harness.js';
import type { StoredResponseEntry } from './response-store.js';

const LONG = 60_000;

const resp = (id: string, over: Partial<StoredResponseEntry> = {}): StoredResponseEntry => ({
  id,
  clientKey: 'key-1',
  body: JSON.stringify({ id, output: [{ type: 'message', content: 'hi' }] }),
  ...over,
});

describe.each(STORE_KINDS)('stored responses (%s store)', (kind) => {
  const h = storeHarness(kind);

  it('put, get and replace: every replica reads what any wrote, its client key with it', async () => {
    const [a, b] = await h.open(2);
    await a!.responses.put(resp('r1'), LONG);
    await a!.responses.put(resp('r2', { clientKey: undefined }), LONG);
    expect(await b!.responses.get('r1')).toStrictEqual(resp('r1'));
    expect(await b!.responses.get('r2')).toStrictEqual(resp('r2', { clientKey: undefined }));
    await b!.responses.put(resp('r1', { body: '{"replaced":true}' }), LONG);
    expect(await a!.responses.get('r1')).toStrictEqual(resp('r1', { body: '{"replaced":true}' }));
    expect(await a!.responses.get('r3')).toBeUndefined();
  });

  it('an entry expires ttl after its last write', async () => {
    const [a] = await h.open(1);
    await a!.responses.put(resp('short'), 150);
    await a!.responses.put(resp('renewed'), 150);
    await a!.responses.put(resp('renewed'), LONG);
    expect(await a!.responses.get('short')).toBeDefined();
    await sleep(250);
    expect(await a!.responses.get('short')).toBeUndefined();
    expect(await a!.responses.get('renewed')).toBeDefined();
    expect(await a!.responses.delete('short')).toBe(false);
  });

  it('past the retention count the first written go; a rewrite keeps its place', async () => {
    const [a, b] = await h.open(2, { task_retention_count: 3 });
    for (const i of [1, 2, 3, 4]) await a!.responses.put(resp(`r${i}`), LONG);
    expect(await b!.responses.get('r1')).toBeUndefined();
    for (const i of [2, 3, 4]) expect(await b!.responses.get(`r${i}`)).toBeDefined();
    await b!.responses.put(resp('r2', { body: 'again' }), LONG);
    await a!.responses.put(resp('r5'), LONG);
    expect(await b!.responses.get('r2')).toBeUndefined();
    for (const i of [3, 4, 5]) expect(await b!.responses.get(`r${i}`)).toBeDefined();
  });

  it('expired entries leave before live ones are trimmed', async () => {
    const [a] = await h.open(1, { task_retention_count: 3 });
    await a!.responses.put(resp('old1'), LONG);
    await a!.responses.put(resp('old2'), LONG);
    // (named to sort last: Redis orders writes of one millisecond by id)
    await a!.responses.put(resp('z-brief'), 100);
    await sleep(200);
    await a!.responses.put(resp('new1'), LONG);
    await a!.responses.put(resp('new2'), LONG);
    // Had `z-brief` still counted, the bound would have taken old1 and then old2.
    expect(await a!.responses.get('old1')).toBeUndefined();
    for (const id of ['old2', 'new1', 'new2']) expect(await a!.responses.get(id)).toBeDefined();
  });

  it('delete removes the entry once; written again it is back', async () => {
    const [a, b] = await h.open(2, { task_retention_count: 2 });
    await a!.responses.put(resp('d1'), LONG);
    await a!.responses.put(resp('d2'), LONG);
    expect(await b!.responses.delete('d1')).toBe(true);
    expect(await b!.responses.delete('d1')).toBe(false);
    expect(await b!.responses.delete('never')).toBe(false);
    expect(await a!.responses.get('d1')).toBeUndefined();
    // the deleted one no longer counts: one more fits without trimming d2
    await a!.responses.put(resp('d3'), LONG);
    expect(await a!.responses.get('d2')).toBeDefined();
    await a!.responses.put(resp('d1'), LONG);
    expect(await a!.responses.get('d1')).toBeDefined();
    expect(await a!.responses.get('d2')).toBeUndefined();
  });
});
