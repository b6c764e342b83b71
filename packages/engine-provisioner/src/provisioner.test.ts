import { copyFile, mkdtemp, readFile, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  BuildProvenanceSchema,
  PoolConfigSchema,
  PreparedEngineSchema,
  type PoolConfigInput,
} from '@llama-orch/contracts';
import { EngineProvisionError } from './errors.js';
import { createFixtureSource, writeScript, type FixtureSource } from './fixtures/fixture-source.js';
import { projectMemory } from './memory-projection.js';
import { EngineProvisioner } from './provisioner.js';
import type { EngineProgress } from './progress.js';

// These tests run the provisioner's real path (git, cmake, the C compiler, the lock, the cache)
// against the fixture source tree in fixtures/mini-engine, which builds in seconds. The real
// llama.cpp build is covered in real-engine.test.ts.

const log = pino({ level: 'silent' });
const dirs: string[] = [];
afterAll(async () => {
  await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })));
});
async function temp(prefix = 'llorch-ep-'): Promise<string> {
  const d = await mkdtemp(join(tmpdir(), prefix));
  dirs.push(d);
  return d;
}

let fixture: FixtureSource;
beforeAll(async () => {
  fixture = await createFixtureSource(await temp('llorch-fixture-'));
});

// The fixture is not llama.cpp: llama-orch's carried patches are off for it (patches.test.ts covers them).
const pool = (over: Partial<PoolConfigInput> = {}) => {
  const source = over.source ?? { kind: 'bundle', bundle_path: fixture.bundlePath };
  return PoolConfigSchema.parse({
    id: 'mini',
    model: '/models/x.gguf',
    ...over,
    source: source.kind === 'external' ? source : { patches: false, ...source },
  });
};

async function errorOf(p: Promise<unknown>): Promise<EngineProvisionError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(EngineProvisionError);
  return err as EngineProvisionError;
}

async function engineEntries(cacheDir: string): Promise<string[]> {
  return (await readdir(join(cacheDir, 'engines')).catch(() => [] as string[])).filter((e) => /^[0-9a-f]{64}$/.test(e));
}

describe('EngineProvisioner with the fixture source', () => {
  it('builds once, writes provenance, and the second ensure is a cache hit', async () => {
    const cacheDir = await temp();
    const counter = join(cacheDir, 'configure-count');
    const p = pool({ build_flags: [`-DFIXTURE_COUNTER=${counter}`] });
    const progress: EngineProgress[] = [];
    const prov = new EngineProvisioner({ cacheDir, logger: log, env: process.env, jobs: 2 });
    const first = await prov.ensureBinary(p, { onProgress: (e) => progress.push(e) });
    expect(first.cached).toBe(false);
    expect(first.engine_version).toBe('9.9.9-fixture (build 1, commit f1x7ure)');
    expect(first.binary_path).toBe(join(cacheDir, 'engines', first.engine_fingerprint, 'llama-server'));
    // the fit tool comes from the same build and sits beside the server (the fixture's prints 1 2 3)
    expect(first.fit_params_path).toBe(join(cacheDir, 'engines', first.engine_fingerprint, 'llama-fit-params'));
    expect(
      await projectMemory({ fitParams: first.fit_params_path ?? '', model: '/models/x.gguf', ctx: 512, slots: 1 }),
    ).toEqual({ devices: [], host: { model_mib: 1, context_mib: 2, compute_mib: 3, total_mib: 6 } });
    const provenance = BuildProvenanceSchema.parse(
      JSON.parse(await readFile(join(cacheDir, 'engines', first.engine_fingerprint, 'build.json'), 'utf8')),
    );
    expect(provenance).toMatchObject({ source: 'bundle:custom', commit: fixture.commit, cuda: false });
    expect(provenance.cmake_flags).toEqual(
      expect.arrayContaining([
        '-DBUILD_SHARED_LIBS=OFF',
        '-DLLAMA_USE_PREBUILT_UI=OFF',
        '-DLLAMA_OPENSSL=OFF',
        '-DGGML_NATIVE=OFF',
        '-DGGML_CUDA=OFF',
        `-DFIXTURE_COUNTER=${counter}`,
      ]),
    );
    expect(Object.keys(provenance.toolchain)).toEqual(expect.arrayContaining(['cmake', 'cxx']));
    expect(provenance.version_output).toMatch(/^version: 9\.9\.9-fixture/);
    expect(progress.at(-1)).toMatchObject({ phase: 'done', fraction: 1, cached: false });
    expect(progress.some((e) => e.phase === 'build' && (e.build_percent ?? 0) === 100)).toBe(true);
    const fractions = progress.map((e) => e.fraction);
    expect(fractions).toEqual([...fractions].sort((a, b) => a - b));

    const mtime = (await stat(join(first.binary_path, '..', 'build.json'))).mtimeMs;
    const second = await new EngineProvisioner({ cacheDir, logger: log, env: process.env }).ensureBinary(p);
    expect(second).toMatchObject({
      cached: true,
      binary_path: first.binary_path,
      fit_params_path: first.fit_params_path,
      engine_fingerprint: first.engine_fingerprint,
    });
    expect((await stat(join(first.binary_path, '..', 'build.json'))).mtimeMs).toBe(mtime);
    // cmake configured exactly once over both calls
    expect((await readFile(counter, 'utf8')).trim().split('\n')).toEqual(['configure']);
    expect((await readdir(join(cacheDir, 'engines'))).filter((e) => e.startsWith('.tmp-'))).toEqual([]);
  });

  it('an entry without llama-fit-params (as built before the tool was) is rebuilt under its key', async () => {
    const cacheDir = await temp();
    const counter = join(cacheDir, 'configure-count');
    const p = pool({ build_flags: [`-DFIXTURE_COUNTER=${counter}`] });
    const prov = new EngineProvisioner({ cacheDir, logger: log, env: process.env });
    const first = await prov.ensureBinary(p);
    await rm(first.fit_params_path ?? '');
    const again = await prov.ensureBinary(p);
    expect(again).toMatchObject({
      cached: false,
      engine_fingerprint: first.engine_fingerprint,
      fit_params_path: first.fit_params_path,
    });
    expect((await stat(again.fit_params_path ?? '')).isFile()).toBe(true);
    expect((await readFile(counter, 'utf8')).trim().split('\n')).toEqual(['configure', 'configure']);
  });

  it('gives different inputs different fingerprints and the git source the same commit', async () => {
    const cacheDir = await temp();
    const prov = new EngineProvisioner({ cacheDir, logger: log, env: process.env });
    const a = await prov.ensureBinary(pool());
    const b = await prov.ensureBinary(pool({ build_flags: ['-DFIXTURE_EXTRA=1'] }));
    expect(a.engine_fingerprint).not.toBe(b.engine_fingerprint);
    const viaGit = await prov.ensureBinary(pool({ source: { kind: 'git', repo: fixture.repoDir, ref: 'v1.0.0' } }));
    expect(viaGit.build_provenance.commit).toBe(fixture.commit);
    // same commit and flags: the bundle's cache entry is reused (its provenance names the first origin)
    expect(viaGit).toMatchObject({ engine_fingerprint: a.engine_fingerprint, cached: true });
    const viaGitOnly = await new EngineProvisioner({
      cacheDir: await temp(),
      logger: log,
      env: process.env,
    }).ensureBinary(pool({ source: { kind: 'git', repo: fixture.repoDir, ref: 'v1.0.0' } }));
    expect(viaGitOnly.build_provenance.source).toBe(`git:${fixture.repoDir}@v1.0.0`);
    expect(viaGitOnly.engine_fingerprint).toBe(a.engine_fingerprint);
  });

  it('prepare returns a valid PreparedEngine with a free port and the engine argv', async () => {
    const cacheDir = await temp();
    const prov = new EngineProvisioner({ cacheDir, logger: log, env: process.env });
    const prepared = await prov.prepare(pool({ ctx: 512, slots: 3, device_mask: '0,1' }), {
      modelPath: '/models/x.gguf',
      replicaId: 'r1',
    });
    expect(PreparedEngineSchema.parse(prepared)).toEqual(prepared);
    expect(prepared).toMatchObject({
      host: '127.0.0.1',
      model_path: '/models/x.gguf',
      pool_id: 'mini',
      replica_id: 'r1',
      device_mask: '0,1',
      gpu_policy: 'off',
      engine: 'llamacpp',
    });
    expect(prepared.port).toBeGreaterThan(0);
    expect(prepared.flags.slice(0, 10)).toEqual([
      '-m',
      '/models/x.gguf',
      '--host',
      '127.0.0.1',
      '--port',
      String(prepared.port),
      '-c',
      '512',
      '-np',
      '3',
    ]);
  });

  it('a failed build leaves a readable log, no cache entry and no staging dir', async () => {
    const cacheDir = await temp();
    const prov = new EngineProvisioner({ cacheDir, logger: log, env: process.env });
    const err = await errorOf(prov.ensureBinary(pool({ build_flags: ['-DFIXTURE_BROKEN=ON'] })));
    expect(err.code).toBe('BUILD_FAILED');
    const logPath = err.context.logPath as string;
    expect(logPath).toMatch(new RegExp(`${join(cacheDir, 'engines', 'failed')}/[0-9a-f]{64}-.*\\.log$`));
    expect(err.message).toContain(logPath);
    expect(await readFile(logPath, 'utf8')).toMatch(/broken on purpose/);
    expect(await engineEntries(cacheDir)).toEqual([]);
    expect((await readdir(join(cacheDir, 'engines'))).filter((e) => e.startsWith('.tmp-'))).toEqual([]);
  });

  it('gpu: required without a CUDA toolkit fails typed before anything is built or cached', async () => {
    const cacheDir = await temp();
    const emptyRoot = await temp('llorch-nocuda-');
    // this host has nvcc; the injected env and search root describe one without it
    const prov = new EngineProvisioner({ cacheDir, logger: log, env: { PATH: '' }, cudaSearchRoots: [emptyRoot] });
    const err = await errorOf(prov.ensureBinary(pool({ gpu: 'required' })));
    expect(err.code).toBe('GPU_TOOLKIT_MISSING');
    expect(err.message).toMatch(/nvcc/);
    expect(err.message).toMatch(/CUDA_HOME/);
    expect(err.context.missing).toBe('nvcc');
    await expect(stat(join(cacheDir, 'engines'))).rejects.toMatchObject({ code: 'ENOENT' });
    await expect(prov.prepare(pool({ gpu: 'required' }), { modelPath: '/m', replicaId: 'r0' })).rejects.toMatchObject({
      code: 'GPU_TOOLKIT_MISSING',
    });
  });

  it('gpu: optional without a toolkit builds for CPU', async () => {
    const cacheDir = await temp();
    const env: Record<string, string | undefined> = {
      ...process.env,
      PATH: (process.env.PATH ?? '')
        .split(':')
        .filter((d) => d !== '/usr/local/bin')
        .join(':'),
    };
    delete env.CUDA_HOME;
    delete env.CUDA_PATH;
    const prov = new EngineProvisioner({ cacheDir, logger: log, env, cudaSearchRoots: [await temp('llorch-nocuda-')] });
    const bin = await prov.ensureBinary(pool({ gpu: 'optional' }));
    expect(bin.build_provenance.cuda).toBe(false);
    expect(bin.build_provenance.cmake_flags).toContain('-DGGML_CUDA=OFF');
  });

  it('bad sources fail typed: missing bundle, bad git ref, missing repo', async () => {
    const cacheDir = await temp();
    const prov = new EngineProvisioner({ cacheDir, logger: log, env: process.env });
    expect(
      (await errorOf(prov.ensureBinary(pool({ source: { kind: 'bundle', bundle_path: '/nonexistent/x.bundle' } }))))
        .code,
    ).toBe('SOURCE_NOT_FOUND');
    const badRef = await errorOf(
      prov.ensureBinary(pool({ source: { kind: 'git', repo: fixture.repoDir, ref: 'no-such-ref' } })),
    );
    expect(badRef.code).toBe('SOURCE_REF_INVALID');
    expect(badRef.message).toMatch(/no-such-ref/);
    const badRepo = await errorOf(
      prov.ensureBinary(pool({ source: { kind: 'git', repo: '/nonexistent/repo', ref: 'main' } })),
    );
    expect(['SOURCE_NOT_FOUND', 'SOURCE_FETCH_FAILED']).toContain(badRepo.code);
    expect(await engineEntries(cacheDir)).toEqual([]);
  });

  it('an unwritable cache dir fails with CACHE_UNWRITABLE', async () => {
    const d = await temp();
    const file = join(d, 'not-a-dir');
    await writeFile(file, 'x');
    const prov = new EngineProvisioner({ cacheDir: join(file, 'cache'), logger: log, env: process.env });
    const err = await errorOf(prov.ensureBinary(pool()));
    expect(err.code).toBe('CACHE_UNWRITABLE');
    expect(err.message).toContain(join(file, 'cache', 'engines'));
  });

  it('build_flags may not override the GPU/native/shared-libs policy', async () => {
    const prov = new EngineProvisioner({ cacheDir: await temp(), logger: log, env: process.env });
    const err = await errorOf(prov.ensureBinary(pool({ build_flags: ['-DGGML_CUDA=OFF', '-DBUILD_SHARED_LIBS=ON'] })));
    expect(err.code).toBe('CONFIG_INVALID');
    expect(err.message).toMatch(/-DGGML_CUDA=OFF, -DBUILD_SHARED_LIBS=ON/);
  });

  it('rejects an unparsed pool object with every problem listed', async () => {
    const prov = new EngineProvisioner({ cacheDir: await temp(), logger: log, env: process.env });
    const bad = { id: 'Bad Id', model: '', gpu: 'maybe' } as unknown as Parameters<typeof prov.ensureBinary>[0];
    const err = await errorOf(prov.ensureBinary(bad));
    expect(err.code).toBe('CONFIG_INVALID');
    expect(err.message).toMatch(/id:/);
    expect(err.message).toMatch(/gpu:/);
    expect(err.message).toMatch(/model:/);
  });

  it('an abort during the build leaves no entry and reports ABORTED', async () => {
    const cacheDir = await temp();
    const prov = new EngineProvisioner({ cacheDir, logger: log, env: process.env });
    const ac = new AbortController();
    const pending = prov.ensureBinary(pool({ build_flags: ['-DFIXTURE_SLEEP=30'] }), {
      signal: ac.signal,
      onProgress: (e) => {
        if (e.phase === 'configure') setTimeout(() => ac.abort(), 300);
      },
    });
    const err = await errorOf(pending);
    expect(err.code).toBe('ABORTED');
    expect(await engineEntries(cacheDir)).toEqual([]);
    expect((await readdir(join(cacheDir, 'engines'))).filter((e) => e.startsWith('.tmp-'))).toEqual([]);
  });
});

describe('external source', () => {
  it('verifies --version on stderr and fingerprints the file', async () => {
    const cacheDir = await temp();
    const prov = new EngineProvisioner({ cacheDir, logger: log, env: process.env });
    const built = await prov.ensureBinary(pool());
    const ext = await prov.ensureBinary(pool({ source: { kind: 'external', binary_path: built.binary_path } }));
    expect(ext).toMatchObject({
      binary_path: built.binary_path,
      fit_params_path: built.fit_params_path,
      engine_version: built.engine_version,
      cached: true,
    });
    // alone in its folder, the same binary has no fit tool
    const alone = join(await temp(), 'llama-server');
    await copyFile(built.binary_path, alone);
    const lone = await prov.ensureBinary(pool({ source: { kind: 'external', binary_path: alone } }));
    expect(lone.fit_params_path).toBeUndefined();
    expect(ext.build_provenance).toMatchObject({ source: 'external', cmake_flags: [], cuda: false, build_ms: 0 });
    expect(ext.engine_fingerprint).toMatch(/^[0-9a-f]{64}$/);
    // gpu: required refuses an external binary without CUDA
    expect(
      (
        await errorOf(
          prov.ensureBinary(pool({ gpu: 'required', source: { kind: 'external', binary_path: built.binary_path } })),
        )
      ).code,
    ).toBe('EXTERNAL_BINARY_INVALID');
  });

  it('rejects missing, non-executable and non-llama binaries', async () => {
    const d = await temp();
    const prov = new EngineProvisioner({ cacheDir: d, logger: log, env: process.env });
    const ext = (binary_path: string) => prov.ensureBinary(pool({ source: { kind: 'external', binary_path } }));
    expect((await errorOf(ext(join(d, 'missing')))).message).toMatch(/not found/);
    const plain = join(d, 'plain');
    await writeFile(plain, 'x');
    expect((await errorOf(ext(plain))).message).toMatch(/not executable/);
    const impostor = await writeScript(join(d, 'impostor'), 'echo "I am not llama-server" >&2; exit 0');
    const err = await errorOf(ext(impostor));
    expect(err.code).toBe('EXTERNAL_BINARY_INVALID');
    expect(err.message).toMatch(/not a working llama-server/);
  });
});
