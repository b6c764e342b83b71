import { mkdtemp, readFile, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execa } from 'execa';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PoolConfigSchema } from '@llama-orch/contracts';
import { defaultPatchesDir, loadPatchSet } from '@llama-orch/llamacpp-source';
import { EngineProvisionError } from './errors.js';
import { createFixtureSource, FIXTURE_PATCHES_DIR, type FixtureSource } from './fixtures/fixture-source.js';
import { EngineProvisioner } from './provisioner.js';

// Carried source patches through the provisioner's real path (git, cmake, the compiler, the cache)
// on the fixture source tree: `good/` rewrites its version string, `bad/` holds a patch that does
// not apply. The real llama.cpp patch set is checked against the shipped source in
// packages/llamacpp-source (patches.test.ts) and in use by every real-engine test.

const log = pino({ level: 'silent' });
const dirs: string[] = [];
afterAll(async () => {
  await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })));
});
async function temp(prefix = 'llorch-patch-'): Promise<string> {
  const d = await mkdtemp(join(tmpdir(), prefix));
  dirs.push(d);
  return d;
}

let fixture: FixtureSource;
beforeAll(async () => {
  fixture = await createFixtureSource(await temp('llorch-fixture-'));
});

const pool = (patches?: boolean) =>
  PoolConfigSchema.parse({
    id: 'mini',
    model: '/models/x.gguf',
    source: { kind: 'bundle', bundle_path: fixture.bundlePath, ...(patches !== undefined ? { patches } : {}) },
  });

describe('carried source patches', () => {
  it('are applied to a build-private copy: the binary has them, provenance and log name them, the shared source is untouched', async () => {
    const cacheDir = await temp();
    const prov = new EngineProvisioner({
      cacheDir,
      logger: log,
      env: process.env,
      patchesDir: join(FIXTURE_PATCHES_DIR, 'good'),
    });
    const patched = await prov.ensureBinary(pool());
    expect(patched.engine_version).toBe('9.9.9-patched (build 1, commit f1x7ure)');
    expect(patched.build_provenance.patches).toEqual(['0001-fixture-version.patch']);
    const buildLog = await readFile(join(cacheDir, 'engines', patched.engine_fingerprint, 'build.log'), 'utf8');
    expect(buildLog).toMatch(/^# patch 0001-fixture-version\.patch sha256:[0-9a-f]{64}$/m);

    // the shared checkout under sources/<commit> is exactly the commit, as before the build
    const shared = join(cacheDir, 'sources', fixture.commit);
    expect(
      String((await execa('git', ['status', '--porcelain', '--untracked-files=no'], { cwd: shared })).stdout),
    ).toBe('');
    expect(await readFile(join(shared, 'main.c'), 'utf8')).toContain('9.9.9-fixture');

    // the same source unpatched is another cache entry, never the patched one (and vice versa)
    const plain = await prov.ensureBinary(pool(false));
    expect(plain).toMatchObject({ cached: false, engine_version: '9.9.9-fixture (build 1, commit f1x7ure)' });
    expect(plain.engine_fingerprint).not.toBe(patched.engine_fingerprint);
    expect(plain.build_provenance.patches).toBeUndefined();
    expect(await prov.ensureBinary(pool(true))).toMatchObject({
      cached: true,
      engine_fingerprint: patched.engine_fingerprint,
    });
    // another patch set (here: none in the folder) is another key too
    const emptyDir = await temp('llorch-nopatches-');
    const none = await new EngineProvisioner({
      cacheDir,
      logger: log,
      env: process.env,
      patchesDir: emptyDir,
    }).ensureBinary(pool());
    expect(none).toMatchObject({ cached: true, engine_fingerprint: plain.engine_fingerprint });
    expect((await readdir(join(cacheDir, 'engines'))).filter((e) => e.startsWith('.tmp-'))).toEqual([]);
  }, 120_000);

  it('a patch that does not apply is PATCH_FAILED naming it, and leaves no entry and no staging dir', async () => {
    const cacheDir = await temp();
    const prov = new EngineProvisioner({
      cacheDir,
      logger: log,
      env: process.env,
      patchesDir: join(FIXTURE_PATCHES_DIR, 'bad'),
    });
    const err = await prov.ensureBinary(pool()).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(EngineProvisionError);
    expect(err).toMatchObject({
      code: 'PATCH_FAILED',
      context: { patch: '0002-fixture-stale-context.patch', phase: 'patch' },
    });
    expect((err as Error).message).toContain('0002-fixture-stale-context.patch');
    expect(
      (await readdir(join(cacheDir, 'engines'))).filter((e) => /^[0-9a-f]{64}$/.test(e) || e.startsWith('.tmp-')),
    ).toEqual([]);
  });

  it('a missing patches folder fails typed rather than building unpatched', async () => {
    const prov = new EngineProvisioner({
      cacheDir: await temp(),
      logger: log,
      env: process.env,
      patchesDir: '/nonexistent/patches',
    });
    await expect(prov.ensureBinary(pool())).rejects.toMatchObject({ code: 'SOURCE_NOT_FOUND' });
  });

  it('the default set is the llama.cpp patches shipped in @llama-orch/llamacpp-source', async () => {
    const set = await loadPatchSet(defaultPatchesDir());
    expect(set.patches.map((p) => p.name)).toContain('0001-server-queue-stop-check-deadline.patch');
    expect(set.hash).toMatch(/^[0-9a-f]{64}$/);
  });
});
