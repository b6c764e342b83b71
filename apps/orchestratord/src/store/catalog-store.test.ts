import { ModelPolicySchema } from '@llama-orch/contracts';
import { describe, expect, it } from 'vitest';
import { STORE_KINDS, sleep, storeHarness } from '../testing/store-harness.js';
import type { CatalogRegistration } from './catalog-store.js';

const policy = (over: Record<string, unknown> = {}) => ModelPolicySchema.parse(over);
const reg = (ref: string, aliases: string[] = [], over: Partial<CatalogRegistration> = {}): CatalogRegistration => ({
  ref,
  aliases,
  policy: policy(),
  ...over,
});
const SHA = 'c'.repeat(64);

// One contract, both stores: the in-process catalog (the reference model's, which is the product's
// in-process one) and the Redis one (lua/catalog-*.lua).
describe.each(STORE_KINDS)('fleet catalog (%s store)', (kind) => {
  const h = storeHarness(kind);

  it('put creates then updates an entry; every replica reads it by id or alias; an update keeps registeredAt', async () => {
    const [a, b] = await h.open(2);
    const before = Date.now();
    const created = await a!.catalog.put(reg('hf:org/repo/m.gguf', ['m', 'fast'], { sha256: SHA }));
    expect(created).toMatchObject({
      kind: 'created',
      entry: {
        id: 'hf:org/repo/m.gguf',
        ref: 'hf:org/repo/m.gguf',
        aliases: ['m', 'fast'],
        sha256: SHA,
        policy: policy(),
      },
    });
    if (created.kind === 'conflict') throw new Error('unexpected');
    expect(created.entry.registeredAt).toBeGreaterThanOrEqual(before - 50);
    expect(created.entry.lastError).toBeUndefined();
    expect(created.entry.load).toBeUndefined();
    for (const name of ['hf:org/repo/m.gguf', 'm', 'fast'])
      expect((await b!.catalog.get(name))?.id, name).toBe('hf:org/repo/m.gguf');
    expect(await b!.catalog.get('other')).toBeUndefined();
    expect(await b!.catalog.get('')).toBeUndefined();
    await sleep(5);
    const updated = await b!.catalog.put(
      reg('hf:org/repo/m.gguf', ['m'], { policy: policy({ pin: 1, max_loaded: 3 }) }),
    );
    expect(updated).toMatchObject({ kind: 'updated', entry: { aliases: ['m'], policy: { pin: 1, max_loaded: 3 } } });
    if (updated.kind === 'conflict') throw new Error('unexpected');
    expect(updated.entry.registeredAt).toBe(created.entry.registeredAt);
    // a re-registration states the whole entry: the digest it left out is gone, and so is the alias
    expect(updated.entry.sha256).toBeUndefined();
    expect(await a!.catalog.get('fast')).toBeUndefined();
    await a!.catalog.put(reg('b-model'));
    expect((await b!.catalog.list()).map((e) => e.id)).toEqual(['b-model', 'hf:org/repo/m.gguf']);
  });

  it('a name belongs to one entry: an alias or ref of another entry is a conflict that writes nothing; a dropped or deleted name is free again', async () => {
    const [a, b] = await h.open(2);
    await a!.catalog.put(reg('one', ['shared']));
    expect(await b!.catalog.put(reg('two', ['x', 'shared']))).toEqual({
      kind: 'conflict',
      name: 'shared',
      owner: 'one',
    });
    expect(await b!.catalog.put(reg('shared'))).toEqual({ kind: 'conflict', name: 'shared', owner: 'one' });
    expect(await b!.catalog.put(reg('two', ['one']))).toEqual({ kind: 'conflict', name: 'one', owner: 'one' });
    expect(await a!.catalog.get('two')).toBeUndefined();
    expect(await a!.catalog.get('x')).toBeUndefined();
    // dropped by an update: free
    await a!.catalog.put(reg('one', ['kept']));
    expect((await b!.catalog.put(reg('two', ['shared']))).kind).toBe('created');
    // deleted by alias: every name of the entry is free
    expect((await b!.catalog.delete('kept'))?.id).toBe('one');
    expect(await a!.catalog.get('one')).toBeUndefined();
    expect(await a!.catalog.delete('one')).toBeUndefined();
    expect((await a!.catalog.put(reg('three', ['kept', 'one']))).kind).toBe('created');
    expect((await a!.catalog.list()).map((e) => [e.id, e.aliases])).toEqual([
      ['three', ['kept', 'one']],
      ['two', ['shared']],
    ]);
  });

  it('12 registrations racing for one alias from 3 replicas: exactly one gets it', async () => {
    const clients = await h.open(3);
    const outcomes = await Promise.all(
      Array.from({ length: 12 }, (_, i) => clients[i % 3]!.catalog.put(reg(`model-${i}`, ['hot']))),
    );
    const created = outcomes.filter((o) => o.kind === 'created');
    expect(created).toHaveLength(1);
    const winner = created[0]!.kind === 'created' ? created[0]!.entry.id : '';
    expect(
      outcomes.filter((o) => o.kind === 'conflict').every((o) => o.kind === 'conflict' && o.owner === winner),
    ).toBe(true);
    expect((await clients[2]!.catalog.list()).map((e) => e.id)).toEqual([winner]);
    expect((await clients[1]!.catalog.get('hot'))?.id).toBe(winner);
  });

  it('the load claim: one of 9 racing owners wins; others see who holds it; only the holder releases; then another wins', async () => {
    const clients = await h.open(3);
    await clients[0]!.catalog.put(reg('m'));
    const outcomes = await Promise.all(
      Array.from({ length: 9 }, (_, i) => clients[i % 3]!.catalog.claimLoad('m', `replica-${i}`, 10_000)),
    );
    const won = outcomes.flatMap((o, i) => (o.kind === 'claimed' ? [`replica-${i}`] : []));
    expect(won).toHaveLength(1);
    const holder = won[0]!;
    const claimed = outcomes.find((o) => o.kind === 'claimed');
    for (const o of outcomes)
      if (o.kind !== 'claimed')
        expect(o).toEqual({ kind: 'held', owner: holder, until: claimed?.kind === 'claimed' ? claimed.until : -1 });
    expect((await clients[1]!.catalog.get('m'))?.load).toEqual({
      owner: holder,
      until: claimed?.kind === 'claimed' ? claimed.until : -1,
    });
    expect(await clients[2]!.catalog.releaseLoad('m', 'someone-else')).toBe(false);
    // the holder renews its own claim
    expect((await clients[2]!.catalog.claimLoad('m', holder, 10_000)).kind).toBe('claimed');
    expect(await clients[1]!.catalog.releaseLoad('m', holder)).toBe(true);
    expect(await clients[1]!.catalog.releaseLoad('m', holder)).toBe(false);
    expect((await clients[0]!.catalog.get('m'))?.load).toBeUndefined();
    expect((await clients[0]!.catalog.claimLoad('m', 'replica-late', 10_000)).kind).toBe('claimed');
    expect(await clients[0]!.catalog.claimLoad('ghost', 'replica-late', 10_000)).toEqual({ kind: 'unknown' });
  });

  it('a claim nobody releases lapses after its ttl, and another caller wins; an update keeps the claim, a delete drops it', async () => {
    const [a, b] = await h.open(2);
    await a!.catalog.put(reg('m'));
    expect((await a!.catalog.claimLoad('m', 'dead-replica', 150)).kind).toBe('claimed');
    expect((await b!.catalog.claimLoad('m', 'other', 150)).kind).toBe('held');
    await sleep(250);
    expect((await b!.catalog.get('m'))?.load).toBeUndefined();
    expect(await a!.catalog.releaseLoad('m', 'dead-replica')).toBe(false);
    expect((await b!.catalog.claimLoad('m', 'other', 10_000)).kind).toBe('claimed');
    await a!.catalog.put(reg('m', ['alias']));
    expect((await a!.catalog.get('alias'))?.load?.owner).toBe('other');
    await a!.catalog.delete('m');
    await a!.catalog.put(reg('m'));
    expect((await b!.catalog.get('m'))?.load).toBeUndefined();
    expect((await a!.catalog.claimLoad('m', 'third', 10_000)).kind).toBe('claimed');
  });

  it('a failed load is recorded for every replica, kept by an update, cleared by the next load; nothing is recorded for an unknown model', async () => {
    const [a, b] = await h.open(2);
    await a!.catalog.put(reg('m'));
    const before = Date.now();
    expect(await b!.catalog.recordLoadError('m', 'model fetch failed: 404')).toBe(true);
    const failed = await a!.catalog.get('m');
    expect(failed?.lastError).toBe('model fetch failed: 404');
    expect(failed?.failedAt).toBeGreaterThanOrEqual(before - 50);
    await a!.catalog.put(reg('m', ['x']));
    expect((await b!.catalog.get('x'))?.lastError).toBe('model fetch failed: 404');
    expect(await a!.catalog.recordLoadError('m', undefined)).toBe(true);
    const cleared = await b!.catalog.get('m');
    expect([cleared?.lastError, cleared?.failedAt]).toEqual([undefined, undefined]);
    expect(await a!.catalog.recordLoadError('ghost', 'x')).toBe(false);
    expect(await a!.catalog.get('ghost')).toBeUndefined();
    expect((await a!.catalog.list()).map((e) => e.id)).toEqual(['m']);
  });
});
