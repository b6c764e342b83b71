import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import pino, { type Logger } from 'pino';
import type { PoolConfig } from '@llama-orch/contracts';
import { readPoolsFile } from './pools-file.js';
import { EngineProvisioner, type EngineBinary } from './provisioner.js';

/**
 * Test support shared by every suite that needs a real llama-server, so the ~5-minute build
 * happens once per checkout: they all use one cache and the provisioner's cross-process lock makes
 * concurrent suites wait for a single build. This module reads `process.env` on purpose (it is a
 * test entry point, not product code).
 */

/** The workspace root: the nearest ancestor of this file holding `pnpm-workspace.yaml`. */
export function repoRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    if (existsSync(join(dir, 'pnpm-workspace.yaml'))) return dir;
    const parent = dirname(dir);
    if (parent === dir) throw new Error(`no pnpm-workspace.yaml above ${fileURLToPath(import.meta.url)}`);
    dir = parent;
  }
}

/** Shared test cache: `$LLORCH_TEST_CACHE_DIR`, else `<repo root>/.cache/llama-orch` (gitignored). */
export function testCacheDir(): string {
  const fromEnv = process.env.LLORCH_TEST_CACHE_DIR;
  return fromEnv ? resolve(fromEnv) : join(repoRoot(), '.cache', 'llama-orch');
}

/** The `cpu0` pool of `requirements/cpu-dev.yaml`: bundle source, GPU off, portable CPU code. */
export async function cpuTestPool(): Promise<PoolConfig> {
  const pool = (await readPoolsFile(join(repoRoot(), 'requirements', 'cpu-dev.yaml'))).pools[0];
  if (!pool) throw new Error('requirements/cpu-dev.yaml has no pools');
  return pool;
}

/**
 * The CPU llama-server of the cpu-dev config, built into {@link testCacheDir} on first use (about
 * 5 minutes on 2 cores; give the calling hook a timeout of 30+ minutes) and a cache hit after.
 * Logs build progress to stderr unless a logger is passed.
 */
export async function ensureCpuTestEngine(logger?: Logger): Promise<EngineBinary> {
  const log = logger ?? pino({ name: 'test-engine', level: process.env.LOG_LEVEL ?? 'info' }, pino.destination(2));
  const provisioner = new EngineProvisioner({ cacheDir: testCacheDir(), logger: log, env: process.env });
  return provisioner.ensureBinary(await cpuTestPool());
}
