import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { CatalogRegisterRequestSchema } from '@llama-orch/contracts';
import { CatalogStore } from './catalog-store.js';
import { captureLogger } from '../testing/test-helpers.js';

const SHA = 'a'.repeat(64);
const T0 = new Date('2026-11-22T01:00:00.000Z');

describe('CatalogStore', () => {
  let dir: string | undefined;
  afterEach(async () => {
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
    dir = undefined;
  });

  it('in memory: register, refresh, delete; nothing written', async () => {
    const store = await CatalogStore.open({ logger: captureLogger().logger });
    await store.register(CatalogRegisterRequestSchema.parse({ ref: 'hf:o/r/a.gguf' }), T0);
    await store.register(CatalogRegisterRequestSchema.parse({ ref: 'hf:o/r/a.gguf', sha256: SHA }), T0);
    expect(store.list()).toEqual([
      { id: 'hf:o/r/a.gguf', ref: 'hf:o/r/a.gguf', sha256: SHA, registered_at: T0.toISOString() },
    ]);
    expect(await store.delete('hf:o/r/a.gguf')).toBe(true);
    expect(await store.delete('hf:o/r/a.gguf')).toBe(false);
    expect(store.list()).toEqual([]);
  });

  it('with a state file: interest survives a restart, removals too, and no temp file is left', async () => {
    dir = await mkdtemp(join(tmpdir(), 'catalog-'));
    const file = join(dir, 'state', 'catalog-interest.json');
    const logs = captureLogger();
    const a = await CatalogStore.open({ file, logger: logs.logger });
    await Promise.all([
      a.register(CatalogRegisterRequestSchema.parse({ ref: 'r1' }), T0),
      a.register(CatalogRegisterRequestSchema.parse({ ref: 'r2', sha256: SHA }), T0),
      a.register(CatalogRegisterRequestSchema.parse({ ref: 'r3' }), T0),
    ]);
    expect(await a.delete('r3')).toBe(true);
    const b = await CatalogStore.open({ file, logger: logs.logger });
    expect(b.list().map((i) => [i.ref, i.sha256])).toEqual([
      ['r1', undefined],
      ['r2', SHA],
    ]);
    expect(await readdir(join(dir, 'state'))).toEqual(['catalog-interest.json']);
  });

  it('a state file that is not valid is kept aside, logged, and the catalog starts empty', async () => {
    dir = await mkdtemp(join(tmpdir(), 'catalog-'));
    const file = join(dir, 'catalog-interest.json');
    await writeFile(file, '{"version":1,"interests":[{"id":"x"}]');
    const logs = captureLogger();
    const store = await CatalogStore.open({ file, logger: logs.logger });
    expect(store.list()).toEqual([]);
    const names = await readdir(dir);
    const aside = names.find((n) => n.startsWith('catalog-interest.json.corrupt-'));
    expect(aside).toBeDefined();
    expect(await readFile(join(dir, aside as string), 'utf8')).toBe('{"version":1,"interests":[{"id":"x"}]');
    expect(logs.records().some((r) => r.msg === 'catalog state unreadable')).toBe(true);
    await store.register(CatalogRegisterRequestSchema.parse({ ref: 'r1' }), T0);
    expect((await CatalogStore.open({ file, logger: logs.logger })).list().map((i) => i.ref)).toEqual(['r1']);
  });

  it('a write that fails changes nothing: the call rejects and the catalog stays as it was', async () => {
    dir = await mkdtemp(join(tmpdir(), 'catalog-'));
    const stateDir = join(dir, 'state');
    const file = join(stateDir, 'catalog-interest.json');
    const store = await CatalogStore.open({ file, logger: captureLogger().logger });
    await store.register(CatalogRegisterRequestSchema.parse({ ref: 'r1' }), T0);
    await rm(stateDir, { recursive: true });
    await expect(store.register(CatalogRegisterRequestSchema.parse({ ref: 'r2' }), T0)).rejects.toThrow(/ENOENT/);
    await expect(store.delete('r1')).rejects.toThrow(/ENOENT/);
    expect(store.list().map((i) => i.ref)).toEqual(['r1']);
  });
});

describe('CatalogStore.close', () => {
  it('waits for the write in progress, refuses later changes, and is idempotent', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'catalog-close-'));
    try {
      const file = join(dir, 'catalog-interest.json');
      const store = await CatalogStore.open({ file, logger: captureLogger().logger });
      const pending = store.register(CatalogRegisterRequestSchema.parse({ ref: 'hf:o/r/a.gguf' }), T0);
      const closing = store.close();
      expect(store.close()).toBe(closing);
      await closing;
      await pending;
      expect(store.state).toBe('closed');
      expect(JSON.parse(await readFile(file, 'utf8'))).toMatchObject({ interests: [{ ref: 'hf:o/r/a.gguf' }] });
      await expect(store.register(CatalogRegisterRequestSchema.parse({ ref: 'hf:o/r/b.gguf' }), T0)).rejects.toMatchObject({
        code: 'INTERNAL',
        retriable: true,
      });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
