import { mkdtemp, mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { execa } from 'execa';
import { afterAll, describe, expect, it } from 'vitest';
import { ensureSourceTree, loadPatchSet, preparePatchedTree, SourceError } from './index.js';

const dirs: string[] = [];
afterAll(async () => {
  await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })));
});
async function temp(): Promise<string> {
  const d = await mkdtemp(join(tmpdir(), 'llorch-patches-'));
  dirs.push(d);
  return d;
}

// The shared test cache already holds the shipped source when set (test entry point: reads env).
const cacheDir = async (): Promise<string> =>
  process.env.LLORCH_TEST_CACHE_DIR ? resolve(process.env.LLORCH_TEST_CACHE_DIR) : temp();

describe('carried llama.cpp patches', () => {
  it('apply to the shipped source in a private copy, leaving the shared checkout as it was', async () => {
    const tree = await ensureSourceTree({ cacheDir: await cacheDir(), source: { kind: 'bundle' } });
    const set = await loadPatchSet();
    expect(set.patches.length).toBeGreaterThan(0);
    const dest = join(await temp(), 'src');
    await preparePatchedTree(tree, set, dest);
    const patched = await readFile(join(dest, 'tools', 'server', 'server-queue.cpp'), 'utf8');
    expect(patched).toContain('condition_results.wait_until(lock, deadline)');
    expect(await readFile(join(tree.dir, 'tools', 'server', 'server-queue.cpp'), 'utf8')).toContain(
      'condition_results.wait_for(lock, std::chrono::seconds(timeout))',
    );
    expect(
      String((await execa('git', ['status', '--porcelain', '--untracked-files=no'], { cwd: tree.dir })).stdout),
    ).toBe('');
    // the copy keeps the commit, so the build's version stamp is the upstream one
    expect(String((await execa('git', ['rev-parse', 'HEAD'], { cwd: dest })).stdout).trim()).toBe(tree.commit);
  }, 180_000);

  it('a patch that does not apply fails typed, naming it', async () => {
    // a one-file repository stands in for a checkout: the failure does not depend on the tree's size
    const repo = join(await temp(), 'repo');
    await mkdir(repo);
    await writeFile(join(repo, 'README.md'), 'the first line\n');
    const git = (args: string[]) =>
      execa('git', args, {
        cwd: repo,
        env: { GIT_AUTHOR_NAME: 't', GIT_AUTHOR_EMAIL: 't@t', GIT_COMMITTER_NAME: 't', GIT_COMMITTER_EMAIL: 't@t' },
      });
    await git(['init', '--quiet']);
    await git(['add', '.']);
    await git(['commit', '--quiet', '-m', 'one file']);
    const tree = { dir: repo, commit: String((await git(['rev-parse', 'HEAD'])).stdout).trim(), origin: 'test' };
    const dir = join(await temp(), 'patches');
    await mkdir(dir);
    await writeFile(
      join(dir, '0001-stale.patch'),
      [
        '--- a/README.md',
        '+++ b/README.md',
        '@@ -1,1 +1,1 @@',
        '-a line that is not the first line of the README',
        '+its replacement',
        '',
      ].join('\n'),
    );
    const err = await preparePatchedTree(tree, await loadPatchSet(dir), join(await temp(), 'src')).catch(
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(SourceError);
    expect(err).toMatchObject({ code: 'SOURCE_PATCH_FAILED', context: { patch: '0001-stale.patch' } });
    expect((err as Error).message).toContain('0001-stale.patch');
  });

  it('hashes the set by name and content, in name order; an empty folder is no patches', async () => {
    const dir = await temp();
    expect(await loadPatchSet(dir)).toEqual({ patches: [], hash: undefined });
    await writeFile(join(dir, '0002-b.patch'), 'b');
    await writeFile(join(dir, '0001-a.patch'), 'a');
    await writeFile(join(dir, 'notes.txt'), 'not a patch');
    const one = await loadPatchSet(dir);
    expect(one.patches.map((p) => p.name)).toEqual(['0001-a.patch', '0002-b.patch']);
    await writeFile(join(dir, '0002-b.patch'), 'b2');
    expect((await loadPatchSet(dir)).hash).not.toBe(one.hash);
  });
});
