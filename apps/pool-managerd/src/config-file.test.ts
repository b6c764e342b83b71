import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { repoRoot } from '@llama-orch/engine-provisioner';
import { loadPoolManagerConfig } from './config.js';
import { ConfigError } from './errors.js';

const dirs: string[] = [];
afterAll(async () => {
  await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })));
});
async function writeConfig(text: string): Promise<string> {
  const d = await mkdtemp(join(tmpdir(), 'llorch-cfg-'));
  dirs.push(d);
  const p = join(d, 'config.yaml');
  await writeFile(p, text);
  return p;
}

async function loadError(path: string, env: Record<string, string> = {}): Promise<ConfigError> {
  const err = await loadPoolManagerConfig(path, env).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ConfigError);
  return err as ConfigError;
}

describe('loadPoolManagerConfig', () => {
  it.each(['cpu-dev.yaml', 'cuda-single-gpu.yaml', 'git-source.yaml', 'two-pool.yaml', 'engine-doors.yaml'])(
    'accepts requirements/%s',
    async (file) => {
      const cfg = await loadPoolManagerConfig(join(repoRoot(), 'requirements', file));
      expect(cfg.pools.length).toBeGreaterThan(0);
      expect(Object.isFrozen(cfg.pools[0])).toBe(true);
    },
  );

  it('reads the cpu-dev defaults the test engine relies on', async () => {
    const cfg = await loadPoolManagerConfig(join(repoRoot(), 'requirements', 'cpu-dev.yaml'));
    expect(cfg.node.id).toBe('dev-node');
    expect(cfg.pools[0]).toMatchObject({
      id: 'cpu0',
      gpu: 'off',
      native: false,
      source: { kind: 'bundle' },
      model: 'synthetic:llama?ctx=4096',
      aliases: ['synthetic'],
    });
    const cuda = await loadPoolManagerConfig(join(repoRoot(), 'requirements', 'cuda-single-gpu.yaml'));
    expect(cuda.pools[0]).toMatchObject({ gpu: 'required', cuda_architectures: '90', gpu_layers: 'all' });
    const git = await loadPoolManagerConfig(join(repoRoot(), 'requirements', 'git-source.yaml'));
    expect(git.pools[0]?.source).toEqual({
      kind: 'git',
      repo: 'https://github.com/ggml-org/llama.cpp.git',
      ref: 'v0.5.0',
    });
  });

  it('rejects unknown keys and bad values, all in one error', async () => {
    const path = await writeConfig(
      [
        'node: { id: n1, colour: blue }',
        'pools:',
        '  - id: p0',
        '    model: synthetic:llama',
        '    gpu: sometimes',
        '    ctx: 10',
        '    turbo: true',
        'extra_top: 1',
      ].join('\n'),
    );
    const err = await loadError(path);
    expect(err.code).toBe('CONFIG_INVALID');
    expect(err.message).toMatch(/colour/);
    expect(err.message).toMatch(/turbo/);
    expect(err.message).toMatch(/extra_top/);
    expect(err.message).toMatch(/pools\[0\]\.gpu/);
    expect(err.message).toMatch(/pools\[0\]\.ctx/);
  });

  it('reports YAML syntax errors, duplicate pools and a missing file as CONFIG_INVALID', async () => {
    expect((await loadError(await writeConfig('node: { id: n1\npools: ['))).message).toMatch(/not valid YAML/);
    const dup = await writeConfig('node: { id: n1 }\npools:\n  - { id: a, model: m }\n  - { id: a, model: m }\n');
    expect((await loadError(dup)).message).toMatch(/duplicate pool id 'a'/);
    expect((await loadError('/nonexistent/config.yaml')).message).toMatch(/ENOENT/);
  });

  it('takes api_token from env LLORCH_API_TOKEN when the file has none', async () => {
    const path = await writeConfig('node: { id: n1 }\npools:\n  - { id: a, model: m }\n');
    expect((await loadPoolManagerConfig(path, { LLORCH_API_TOKEN: 'x'.repeat(20) })).api_token).toBe('x'.repeat(20));
    expect((await loadPoolManagerConfig(path, {})).api_token).toBeUndefined();
  });
});
