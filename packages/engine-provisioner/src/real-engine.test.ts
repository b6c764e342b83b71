import { readFile, readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { execa } from 'execa';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { BuildProvenanceSchema, PoolConfigSchema } from '@llama-orch/contracts';
import { EngineProvisioner } from './provisioner.js';
import { cpuTestPool, ensureCpuTestEngine, testCacheDir } from './testing.js';

// The real llama-server, built from the llama.cpp bundle in node-llama-cpp into the shared test
// cache (<repo>/.cache/llama-orch or $LLORCH_TEST_CACHE_DIR). The first run builds it (~5+ min on
// 2 cores); every later run and every other suite gets a cache hit.

const BUILD_TIMEOUT = 45 * 60_000;

describe('real llama-server from the bundle', () => {
  it(
    'builds (or finds) the CPU engine, which runs --version and carries its provenance',
    async () => {
      const bin = await ensureCpuTestEngine();
      expect(bin.binary_path).toBe(join(testCacheDir(), 'engines', bin.engine_fingerprint, 'llama-server'));
      const res = await execa(bin.binary_path, ['--version'], { reject: false, timeout: 30_000 });
      expect(res.exitCode).toBe(0);
      // --version prints to stderr
      expect(String(res.stderr)).toMatch(/^version: 0\.5\.0-dev \(build 1, commit de3ff81\)$/m);
      expect(bin.engine_version).toBe('0.5.0-dev (build 1, commit de3ff81)');
      // llama-fit-params comes from the same build, beside the server
      expect(bin.fit_params_path).toBe(join(testCacheDir(), 'engines', bin.engine_fingerprint, 'llama-fit-params'));
      const fit = await execa(bin.fit_params_path ?? '', ['--version'], { reject: false, timeout: 30_000 });
      expect(fit.exitCode).toBe(0);
      expect(String(fit.stderr)).toMatch(/^version: 0\.5\.0-dev \(build 1, commit de3ff81\)$/m);
      const provenance = BuildProvenanceSchema.parse(
        JSON.parse(await readFile(join(bin.binary_path, '..', 'build.json'), 'utf8')),
      );
      expect(provenance).toEqual(bin.build_provenance);
      expect(provenance).toMatchObject({
        source: 'bundle:v0.5.0',
        commit: expect.stringMatching(/^de3ff81[0-9a-f]{33}$/),
        cuda: false,
      });
      expect(provenance.cmake_flags).toEqual(
        expect.arrayContaining([
          '-DBUILD_SHARED_LIBS=OFF',
          '-DGGML_NATIVE=OFF',
          '-DGGML_CUDA=OFF',
          '-DLLAMA_USE_PREBUILT_UI=OFF',
          '-DLLAMA_OPENSSL=OFF',
        ]),
      );
      expect(provenance.build_ms).toBeGreaterThan(0);
      // self-contained: no RUNPATH into a build dir, so the cached copy runs anywhere. readelf comes
      // with binutils, which the C++ toolchain that built the engine brings: without it this fails.
      for (const program of [bin.binary_path, bin.fit_params_path ?? '']) {
        const readelf = await execa('readelf', ['-d', program], { reject: false });
        expect(readelf.exitCode, `readelf -d ${program}: ${String(readelf.stderr) || readelf.shortMessage}`).toBe(0);
        expect(String(readelf.stdout)).toMatch(/Dynamic section/);
        expect(String(readelf.stdout)).not.toMatch(/RUNPATH|RPATH/);
      }
    },
    BUILD_TIMEOUT,
  );

  it(
    'a second ensure of the same pool is a cache hit: no cmake, build.json untouched',
    async () => {
      const first = await ensureCpuTestEngine();
      const provenancePath = join(first.binary_path, '..', 'build.json');
      const before = await stat(provenancePath);
      const prov = new EngineProvisioner({
        cacheDir: testCacheDir(),
        logger: pino({ level: 'silent' }),
        env: process.env,
      });
      const phases: string[] = [];
      const again = await prov.ensureBinary(await cpuTestPool(), { onProgress: (p) => phases.push(p.phase) });
      expect(again).toMatchObject({
        cached: true,
        binary_path: first.binary_path,
        engine_fingerprint: first.engine_fingerprint,
      });
      expect(phases).not.toContain('configure');
      expect(phases).not.toContain('build');
      expect((await stat(provenancePath)).mtimeMs).toBe(before.mtimeMs);
      const engines = await readdir(join(testCacheDir(), 'engines'));
      expect(engines.filter((e) => e.startsWith(`.tmp-${first.engine_fingerprint}`))).toEqual([]);
    },
    BUILD_TIMEOUT,
  );

  it(
    'the built binary works as an external source',
    async () => {
      const bin = await ensureCpuTestEngine();
      const prov = new EngineProvisioner({
        cacheDir: testCacheDir(),
        logger: pino({ level: 'silent' }),
        env: process.env,
      });
      const pool = PoolConfigSchema.parse({
        ...(await cpuTestPool()),
        source: { kind: 'external', binary_path: bin.binary_path },
      });
      const ext = await prov.ensureBinary(pool);
      expect(ext).toMatchObject({
        binary_path: bin.binary_path,
        fit_params_path: bin.fit_params_path,
        engine_version: bin.engine_version,
        cached: true,
      });
      expect(ext.build_provenance.cuda).toBe(false);
    },
    BUILD_TIMEOUT,
  );
});
