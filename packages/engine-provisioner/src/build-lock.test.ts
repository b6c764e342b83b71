import { existsSync } from 'node:fs';
import { mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import { afterAll, describe, expect, it } from 'vitest';
import { createFixtureSource } from './fixtures/fixture-source.js';

// Two real processes (the built CLI, dist/cli.js: run `pnpm build` first) ensure one fingerprint
// of the fixture source at the same time. The fixture's configure step sleeps so the two really
// overlap; the cross-process lock must make one build and the other wait and reuse it.

const CLI = join(dirname(fileURLToPath(import.meta.url)), '..', 'dist', 'cli.js');
const dirs: string[] = [];
afterAll(async () => {
  await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })));
});

describe('cross-process build lock', () => {
  it('two processes ensuring one fingerprint build it once and get the same binary', async () => {
    expect(existsSync(CLI), `${CLI} is missing: run pnpm build (tsc --build) before this test`).toBe(true);
    const dir = await mkdtemp(join(tmpdir(), 'llorch-lock-'));
    dirs.push(dir);
    const fixture = await createFixtureSource(dir);
    const cacheDir = join(dir, 'cache');
    const counter = join(dir, 'configure-count');
    const config = join(dir, 'config.yaml');
    await writeFile(
      config,
      [
        'node: { id: lock-test }',
        'pools:',
        '  - id: mini',
        '    model: /models/none.gguf',
        `    source: { kind: bundle, bundle_path: ${JSON.stringify(fixture.bundlePath)}, patches: false }`,
        `    build_flags: [${JSON.stringify(`-DFIXTURE_COUNTER=${counter}`)}, -DFIXTURE_SLEEP=3]`,
      ].join('\n'),
    );
    const run = () =>
      execa('node', [CLI, '--config', config, '--pool', 'mini', '--binary-only', '--cache-dir', cacheDir], {
        reject: false,
        timeout: 180_000,
      });
    const [a, b] = await Promise.all([run(), run()]);
    expect(a.exitCode, String(a.stderr)).toBe(0);
    expect(b.exitCode, String(b.stderr)).toBe(0);
    const outA = JSON.parse(String(a.stdout)) as { binary_path: string; engine_fingerprint: string; cached: boolean };
    const outB = JSON.parse(String(b.stdout)) as { binary_path: string; engine_fingerprint: string; cached: boolean };
    expect(outA.binary_path).toBe(outB.binary_path);
    expect(outA.engine_fingerprint).toBe(outB.engine_fingerprint);
    expect([outA.cached, outB.cached].sort()).toEqual([false, true]);
    expect((await readFile(counter, 'utf8')).trim().split('\n')).toEqual(['configure']);
    // the waiter said so in its log
    const waiter = outA.cached ? a : b;
    expect(String(waiter.stderr)).toMatch(/another process is building this engine/);
    const engines = await readdir(join(cacheDir, 'engines'));
    expect(engines.filter((e) => /^[0-9a-f]{64}$/.test(e))).toEqual([outA.engine_fingerprint]);
    expect(engines.filter((e) => e.startsWith('.tmp-') || e.endsWith('.lock'))).toEqual([]);
  }, 240_000);

  it('the CLI rejects unknown config keys, listing each, with exit code 2', async () => {
    expect(existsSync(CLI), `${CLI} is missing: run pnpm build first`).toBe(true);
    const dir = await mkdtemp(join(tmpdir(), 'llorch-cli-'));
    dirs.push(dir);
    const config = join(dir, 'bad.yaml');
    await writeFile(config, 'node: { id: n1, nickname: x }\npools:\n  - { id: p0, model: m, speed: fast }\n');
    const res = await execa(
      'node',
      [CLI, '--config', config, '--pool', 'p0', '--binary-only', '--cache-dir', join(dir, 'c')],
      { reject: false },
    );
    expect(res.exitCode).toBe(2);
    expect(String(res.stderr)).toMatch(/CONFIG_INVALID/);
    expect(String(res.stderr)).toMatch(/nickname/);
    expect(String(res.stderr)).toMatch(/speed/);
    expect(String(res.stdout)).toBe('');
  });
});
