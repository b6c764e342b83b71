import { mkdtemp, rm, stat, readdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ensureSourceTree, locateBundle, SourceError } from './index.js';

const dirs: string[] = [];
afterAll(async () => {
  await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })));
});
async function tempCache(): Promise<string> {
  const d = await mkdtemp(join(tmpdir(), 'llorch-src-'));
  dirs.push(d);
  return d;
}

describe('llama.cpp source', () => {
  it('locates the bundle shipped in node-llama-cpp', () => {
    const b = locateBundle();
    expect(b.bundlePath).toMatch(/gitRelease\.bundle$/);
    expect(b.tag).toMatch(/^v\d+\.\d+\.\d+/);
  });

  it('materialises the bundle once, atomically, and reuses it', async () => {
    const cacheDir = await tempCache();
    const [a, b] = await Promise.all([
      ensureSourceTree({ cacheDir, source: { kind: 'bundle' } }),
      ensureSourceTree({ cacheDir, source: { kind: 'bundle' } }),
    ]);
    expect(a.dir).toBe(b.dir);
    expect(a.commit).toMatch(/^[0-9a-f]{40}$/);
    await stat(join(a.dir, 'tools', 'server', 'server.cpp'));
    await stat(join(a.dir, 'models', 'ggml-vocab-llama-spm.gguf'));
    const entries = await readdir(join(cacheDir, 'sources'));
    expect(entries.filter((e) => e.includes('.tmp-'))).toEqual([]);
    const t0 = performance.now();
    await ensureSourceTree({ cacheDir, source: { kind: 'bundle' } });
    expect(performance.now() - t0).toBeLessThan(2000);
  });

  it('fails typed on a missing bundle and on a bad git ref', async () => {
    const cacheDir = await tempCache();
    await expect(
      ensureSourceTree({ cacheDir, source: { kind: 'bundle', bundlePath: '/nonexistent.bundle' } }),
    ).rejects.toMatchObject({ code: 'SOURCE_NOT_FOUND' });
    const { bundlePath } = locateBundle();
    const err = await ensureSourceTree({
      cacheDir,
      source: { kind: 'git', repo: bundlePath, ref: 'no-such-branch' },
    }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SourceError);
    expect((err as SourceError).code).toBe('SOURCE_REF_INVALID');
  });
});
