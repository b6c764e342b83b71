import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ModelPolicySchema } from '@llama-orch/contracts';
import { systemClock } from '@llama-orch/daemon-support';
import { afterEach, describe, expect, it } from 'vitest';
import { captureLogger } from '../../testing/test-helpers.js';
import type { CatalogRegistration } from '../catalog-store.js';
import { MemoryCatalog } from './memory-catalog.js';

// The in-process catalog's state file (ORCHD_STATE_DIR); its contract with the Redis one is catalog-store.test.ts.

const SHA = 'a'.repeat(64);
const reg = (ref: string, over: Partial<CatalogRegistration> = {}): CatalogRegistration => ({
  ref,
  aliases: [],
  policy: ModelPolicySchema.parse({}),
  ...over,
});

describe('MemoryCatalog state file', () => {
  let dir: string | undefined;
  afterEach(async () => {
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
    dir = undefined;
  });
  const open = (file: string, logs = captureLogger()) =>
    MemoryCatalog.open({ clock: systemClock, file, logger: logs.logger });

  it('entries, aliases, policy and a failed load survive a restart, removals too, and no temp file is left', async () => {
    dir = await mkdtemp(join(tmpdir(), 'catalog-'));
    const file = join(dir, 'state', 'catalog-interest.json');
    const a = await open(file);
    await Promise.all([
      a.put(reg('r1', { aliases: ['one'], policy: ModelPolicySchema.parse({ pin: 1 }) })),
      a.put(reg('r2', { sha256: SHA })),
      a.put(reg('r3')),
    ]);
    expect(await a.recordLoadError('r2', 'fetch failed')).toBe(true);
    expect((await a.claimLoad('r1', 'me', 60_000)).kind).toBe('claimed');
    expect(await a.delete('r3')).toMatchObject({ id: 'r3' });
    const b = await open(file);
    const entries = await b.list();
    expect(entries.map((e) => [e.id, e.aliases, e.policy.pin, e.sha256, e.lastError])).toEqual([
      ['r1', ['one'], 1, undefined, undefined],
      ['r2', [], 0, SHA, 'fetch failed'],
    ]);
    // claims live in memory only: a claim outlives no process
    expect(entries[0]?.load).toBeUndefined();
    expect((await b.get('one'))?.id).toBe('r1');
    expect(await readdir(join(dir, 'state'))).toEqual(['catalog-interest.json']);
  });

  it('reads the interest file of earlier versions (version 1) as entries with the default policy', async () => {
    dir = await mkdtemp(join(tmpdir(), 'catalog-'));
    const file = join(dir, 'catalog-interest.json');
    await writeFile(
      file,
      JSON.stringify({
        version: 1,
        interests: [
          { id: 'hf:o/r/a.gguf', ref: 'hf:o/r/a.gguf', sha256: SHA, registered_at: '2026-11-22T01:00:00.000Z' },
        ],
      }),
    );
    const catalog = await open(file);
    expect(await catalog.list()).toEqual([
      {
        id: 'hf:o/r/a.gguf',
        ref: 'hf:o/r/a.gguf',
        sha256: SHA,
        aliases: [],
        policy: ModelPolicySchema.parse({}),
        registeredAt: Date.parse('2026-11-22T01:00:00.000Z'),
      },
    ]);
    await catalog.put(reg('r2'));
    expect(JSON.parse(await readFile(file, 'utf8'))).toMatchObject({
      version: 2,
      models: [{ id: 'hf:o/r/a.gguf' }, { id: 'r2' }],
    });
  });

  it('a state file that is not valid is kept aside, logged, and the catalog starts empty', async () => {
    dir = await mkdtemp(join(tmpdir(), 'catalog-'));
    const file = join(dir, 'catalog-interest.json');
    await writeFile(file, '{"version":2,"models":[{"id":"x"}]');
    const logs = captureLogger();
    const catalog = await open(file, logs);
    expect(await catalog.list()).toEqual([]);
    const aside = (await readdir(dir)).find((n) => n.startsWith('catalog-interest.json.corrupt-'));
    expect(aside).toBeDefined();
    expect(await readFile(join(dir, aside as string), 'utf8')).toBe('{"version":2,"models":[{"id":"x"}]');
    expect(logs.records().some((r) => r.msg === 'catalog state unreadable')).toBe(true);
    await catalog.put(reg('r1'));
    expect((await (await open(file, logs)).list()).map((e) => e.ref)).toEqual(['r1']);
  });

  it('a write that fails changes nothing: the call rejects and the catalog stays as it was', async () => {
    dir = await mkdtemp(join(tmpdir(), 'catalog-'));
    const stateDir = join(dir, 'state');
    const catalog = await open(join(stateDir, 'catalog-interest.json'));
    await catalog.put(reg('r1'));
    await rm(stateDir, { recursive: true });
    await expect(catalog.put(reg('r2', { aliases: ['r2-alias'] }))).rejects.toThrow(/ENOENT/);
    await expect(catalog.delete('r1')).rejects.toThrow(/ENOENT/);
    await expect(catalog.recordLoadError('r1', 'x')).rejects.toThrow(/ENOENT/);
    expect((await catalog.list()).map((e) => [e.ref, e.lastError])).toEqual([['r1', undefined]]);
    expect(await catalog.get('r2-alias')).toBeUndefined();
  });

  it('close waits for the write in progress, refuses later changes, and is idempotent', async () => {
    dir = await mkdtemp(join(tmpdir(), 'catalog-close-'));
    const file = join(dir, 'catalog-interest.json');
    const catalog = await open(file);
    const pending = catalog.put(reg('hf:o/r/a.gguf'));
    const closing = catalog.close();
    expect(catalog.close()).toBe(closing);
    await closing;
    await pending;
    expect(catalog.state).toBe('closed');
    expect(JSON.parse(await readFile(file, 'utf8'))).toMatchObject({ models: [{ ref: 'hf:o/r/a.gguf' }] });
    await expect(catalog.put(reg('hf:o/r/b.gguf'))).rejects.toMatchObject({ code: 'INTERNAL', retriable: true });
  });
});
