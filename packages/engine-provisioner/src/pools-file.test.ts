import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { EngineProvisionError } from './errors.js';
import { defaultCacheDir, readPoolsFile } from './pools-file.js';
import { repoRoot } from './testing.js';

const dirs: string[] = [];
afterAll(async () => {
  await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })));
});
async function writeConfig(text: string): Promise<string> {
  const d = await mkdtemp(join(tmpdir(), 'llorch-pools-'));
  dirs.push(d);
  const p = join(d, 'config.yaml');
  await writeFile(p, text);
  return p;
}

describe('readPoolsFile', () => {
  it('reads the pools and cache_dir of a pool-managerd config', async () => {
    const file = await readPoolsFile(join(repoRoot(), 'requirements', 'cpu-dev.yaml'));
    expect(file.pools[0]).toMatchObject({ id: 'cpu0', gpu: 'off', source: { kind: 'bundle' } });
    expect(Object.isFrozen(file.pools[0])).toBe(true);
    const other = await readPoolsFile(
      await writeConfig('node: { id: n1 }\ncache_dir: /c\npools:\n  - { id: a, model: m }\n'),
    );
    expect(other).toMatchObject({ cacheDir: '/c', pools: [{ id: 'a', model: 'm' }] });
  });

  it('refuses any invalid key (the whole file is checked against the contract), bad YAML and a missing file as CONFIG_INVALID', async () => {
    for (const path of [
      await writeConfig('node: { id: n1 }\npools:\n  - { id: a, model: m, turbo: true }\n'),
      await writeConfig('node: { id: n1, anything: 1 }\npools:\n  - { id: a, model: m }\n'),
      await writeConfig('pools: ['),
      await writeConfig('node: { id: n1 }\n'),
      '/nonexistent/config.yaml',
    ]) {
      const err = await readPoolsFile(path).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(EngineProvisionError);
      expect((err as EngineProvisionError).code).toBe('CONFIG_INVALID');
    }
  });

  it('computes the default cache dir from a home dir', () => {
    expect(defaultCacheDir('/home/op')).toBe('/home/op/.cache/llama-orch');
  });
});
