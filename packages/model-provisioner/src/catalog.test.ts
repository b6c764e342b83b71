import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readFile, stat, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import type { CatalogEntry } from '@llama-orch/contracts';
import { Catalog, ModelProvisionError, ModelProvisioner, ProvenanceRecordSchema } from './index.js';
import type { ProvenanceRecord } from './index.js';
import { TempDirs, testLogger, testVocabPath } from './test-helpers.js';

const temp = new TempDirs();
afterAll(() => temp.cleanup());

const pkgDir = join(dirname(fileURLToPath(import.meta.url)), '..');
const sha = (s: string): string => createHash('sha256').update(s).digest('hex');

function entry(id: string, over: Partial<CatalogEntry> = {}): CatalogEntry {
  return {
    id,
    ref: `file:/m/${id}.gguf`,
    local_path: `/m/${id}.gguf`,
    sha256: sha(id),
    size_bytes: 100,
    lifecycle: 'Active',
    last_used: new Date(0).toISOString(),
    provenance: { source: 'file' },
    ...over,
  };
}

async function provenance(c: Catalog): Promise<ProvenanceRecord[]> {
  const text = await readFile(c.provenancePath, 'utf8');
  return text
    .trim()
    .split('\n')
    .map((l) => ProvenanceRecordSchema.parse(JSON.parse(l)));
}

function runWriter(dir: string, prefix: string, count: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      [join(pkgDir, 'fixtures', 'catalog-writer.mjs'), dir, prefix, String(count)],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => {
      stderr += d.toString();
    });
    child.on('error', reject);
    child.on('exit', (code) =>
      code === 0 ? resolve() : reject(new Error(`writer ${prefix} exited ${code}: ${stderr}`)),
    );
  });
}

describe('catalog', () => {
  it('puts, gets, touches, changes state and deletes, with provenance lines', async () => {
    const dir = await temp.make();
    const c = new Catalog({ dir, logger: testLogger() });
    expect(await c.list()).toEqual([]);
    await c.put(entry('b-model'));
    await c.put(entry('a-model'));
    expect((await c.list()).map((e) => e.id)).toEqual(['a-model', 'b-model']);
    const t = new Date('2030-01-01T00:00:00.000Z');
    expect((await c.touch('a-model', t)).last_used).toBe(t.toISOString());
    expect((await c.setState('a-model', 'Retired')).lifecycle).toBe('Retired');
    expect(await c.get('a-model')).toMatchObject({ lifecycle: 'Retired', last_used: t.toISOString() });
    expect(await c.delete('a-model')).toBe(true);
    expect(await c.delete('a-model')).toBe(false);
    expect(await c.get('a-model')).toBeUndefined();
    await c.put(entry('b-model', { sha256: sha('new bytes') }));
    expect((await provenance(c)).map((p) => `${p.action}:${p.id}${p.detail ? `:${p.detail}` : ''}`)).toEqual([
      'add:b-model',
      'add:a-model',
      'state:a-model:Active->Retired',
      'delete:a-model',
      'update:b-model',
    ]);
    // the file of a model the cache does not own (a file: ref) is never deleted
    await expect(c.touch('nope')).rejects.toMatchObject({ code: 'MODEL_NOT_FOUND' });
    await expect(c.setState('nope', 'Active')).rejects.toMatchObject({ code: 'MODEL_NOT_FOUND' });
  });

  it('refuses unsafe ids', async () => {
    const c = new Catalog({ dir: await temp.make(), logger: testLogger() });
    for (const id of ['../etc', 'a/b', 'Upper']) {
      const err = await c.put(entry(id)).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ModelProvisionError);
      expect((err as ModelProvisionError).code).toBe('INVALID_MODEL_REF');
    }
    await expect(c.get('../x')).rejects.toMatchObject({ code: 'INVALID_MODEL_REF' });
  });

  it('stays a valid index with every entry under concurrent writers in two processes', async () => {
    if (!existsSync(join(pkgDir, 'dist', 'index.js'))) {
      throw new Error('build first: npx tsc --build packages/model-provisioner (the fixture imports dist/)');
    }
    const dir = await temp.make();
    const local = new Catalog({ dir, logger: testLogger() });
    const n = 25;
    await Promise.all([
      runWriter(dir, 'p1', n),
      runWriter(dir, 'p2', n),
      (async () => {
        for (let i = 0; i < 10; i++) await local.put(entry(`local-${i}`));
      })(),
    ]);
    const all = await local.list();
    expect(all).toHaveLength(2 * n + 10);
    for (const prefix of ['p1', 'p2']) {
      for (let i = 0; i < n; i++) {
        expect(all.find((e) => e.id === `${prefix}-${i}`)).toMatchObject({
          lifecycle: i % 5 === 0 ? 'Retired' : 'Active',
          size_bytes: 1000 + i,
        });
      }
    }
    const lines = await provenance(local);
    expect(lines.filter((l) => l.action === 'add')).toHaveLength(2 * n + 10);
    expect(lines.filter((l) => l.action === 'state')).toHaveLength(2 * Math.ceil(n / 5));
    expect(new Set(lines.map((l) => l.pid)).size).toBe(3);
    // no temp files or lock left behind
    const { readdir } = await import('node:fs/promises');
    expect((await readdir(dir)).sort()).toEqual(['catalog.json', 'provenance.jsonl']);
  });

  it('evicts least recently used cache-owned models down to the budget, never pinned ones', async () => {
    const dir = await temp.make();
    const store = join(dir, 'sha256');
    await mkdir(store);
    const pinned = new Set(['m1']);
    const c = new Catalog({ dir, logger: testLogger(), budgetBytes: 250, isPinned: (id) => pinned.has(id) });
    const file = async (id: string): Promise<string> => {
      const p = join(store, `${sha(id)}.gguf`);
      await writeFile(p, Buffer.alloc(100));
      return p;
    };
    const at = (s: number): string => new Date(s * 1000).toISOString();
    await c.put(entry('m1', { local_path: await file('m1'), last_used: at(1) })); // oldest, but pinned
    await c.put(entry('m2', { local_path: await file('m2'), last_used: at(2) }));
    await c.put(entry('m3', { local_path: await file('m3'), last_used: at(3) }));
    await c.put(entry('m4', { local_path: await file('m4'), last_used: at(4) }));
    await c.put(entry('ext', { last_used: at(0), size_bytes: 10_000 })); // a file: model: not ours, not counted
    expect(await c.usedBytes()).toBe(400);
    c.pin('m4');
    const evicted = await c.evict();
    expect(evicted.map((e) => e.id)).toEqual(['m2', 'm3']);
    expect((await c.list()).map((e) => e.id)).toEqual(['ext', 'm1', 'm4']);
    expect(existsSync(join(store, `${sha('m2')}.gguf`))).toBe(false);
    expect(existsSync(join(store, `${sha('m1')}.gguf`))).toBe(true);
    expect(await c.usedBytes()).toBe(200);
    // over budget when only pinned models remain: they stay
    c.unpin('m4');
    pinned.add('m4');
    expect(await c.evict({ budgetBytes: 0 })).toEqual([]);
    pinned.clear();
    expect((await c.evict({ budgetBytes: 0, keep: ['m4'] })).map((e) => e.id)).toEqual(['m1']);
    expect((await provenance(c)).filter((p) => p.action === 'evict').map((p) => p.id)).toEqual(['m2', 'm3', 'm1']);
    expect(await c.get('ext')).toBeDefined();
  });

  it('deletes a shared store file only with its last entry', async () => {
    const dir = await temp.make();
    await mkdir(join(dir, 'sha256'));
    const p = join(dir, 'sha256', `${sha('x')}.gguf`);
    await writeFile(p, 'x');
    const c = new Catalog({ dir, logger: testLogger() });
    await c.put(entry('one', { local_path: p }));
    await c.put(entry('two', { local_path: p }));
    await c.delete('one');
    expect((await stat(p)).isFile()).toBe(true);
    await c.delete('two');
    expect(existsSync(p)).toBe(false);
  });

  it('recovers from a malformed index by starting a new one and keeping the old file aside', async () => {
    const dir = await temp.make();
    const c = new Catalog({ dir, logger: testLogger() });
    await writeFile(c.indexPath, '{"version": 1, "models": {"x": {"id": 1}}}');
    expect(await c.list()).toEqual([]);
    await c.put(entry('fresh'));
    expect((await c.list()).map((e) => e.id)).toEqual(['fresh']);
    const { readdir } = await import('node:fs/promises');
    expect((await readdir(dir)).some((f) => f.startsWith('catalog.json.corrupt-'))).toBe(true);
  });
});

describe('ensure() and the catalog', () => {
  it('registers models, touches them on reuse and evicts the LRU one over budget unless pinned', async () => {
    const vocabPath = await testVocabPath();
    const cacheDir = await temp.make();
    const inUse = new Set<string>();
    // each default synthetic model is ~9.2 MB: a budget of 15 MB holds one
    const p = new ModelProvisioner({
      cacheDir,
      logger: testLogger(),
      vocabPath,
      progressTty: false,
      budgetBytes: 15_000_000,
      isPinned: (id) => inUse.has(id),
    });
    try {
      const a = await p.ensure('synthetic:llama?seed=1');
      const firstUse = (await p.catalog.get(a.id))?.last_used;
      await new Promise((r) => setTimeout(r, 5));
      await p.ensure('synthetic:llama?seed=1');
      expect(Date.parse((await p.catalog.get(a.id))?.last_used ?? '')).toBeGreaterThan(Date.parse(firstUse ?? ''));

      const b = await p.ensure('synthetic:llama?seed=2');
      expect((await p.catalog.list()).map((e) => e.id)).toEqual([b.id]);
      expect(existsSync(a.local_path)).toBe(false);

      inUse.add(b.id);
      const c = await p.ensure('synthetic:llama?seed=3');
      expect((await p.catalog.list()).map((e) => e.id).sort()).toEqual([b.id, c.id].sort());
      // an evicted model comes back on the next ensure
      inUse.clear();
      const again = await p.ensure('synthetic:llama?seed=1');
      expect(again.sha256).toBe(a.sha256);
      expect(existsSync(again.local_path)).toBe(true);
      const actions = (await provenance(p.catalog)).map((r) => r.action);
      expect(actions.filter((x) => x === 'evict').length).toBeGreaterThanOrEqual(2);
    } finally {
      await p.close();
    }
  });
});
