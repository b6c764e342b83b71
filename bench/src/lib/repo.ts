import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** Repo root: the directory holding pnpm-workspace.yaml above this file. */
export function repoRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, 'pnpm-workspace.yaml'))) {
    const up = dirname(dir);
    if (up === dir) throw new Error('pnpm-workspace.yaml not found above the bench package');
    dir = up;
  }
  return dir;
}

/** Paths the benchmarks use, all derived from the repo root. */
export interface BenchPaths {
  readonly root: string;
  /** `node apps/orchestratord/dist/main.js` */
  readonly orchestratord: string;
  /** `node apps/pool-managerd/dist/main.js` */
  readonly poolManagerd: string;
  /** `node apps/orchestratord/dist/bench/placement-bench.js` */
  readonly placementBench: string;
  /** FIXTURE pool-managerds, many virtual nodes in one process (`packages/fixture-pool-manager`, built). */
  readonly fixturePoolManager: string;
  /** FIXTURE: a bare node:http pass-through (the relay benchmark's floor). */
  readonly passthroughProxy: string;
  readonly streamClient: string;
  /** Engine/model cache shared with the test suites (llama-server is built once per checkout). */
  readonly cacheDir: string;
  /** Scratch space for runtime dirs, configs and daemon logs (gitignored). */
  readonly workDir: string;
  /** A daemon path was overridden (LLORCH_BENCH_ORCHESTRATORD / LLORCH_BENCH_POOL_MANAGERD). */
  readonly overridden: boolean;
  readonly resultsDir: string;
  readonly readme: string;
  /** Every figure of every result (`docs/performance.md`), regenerated with the README's table. */
  readonly performancePage: string;
}

export function benchPaths(env: Readonly<Record<string, string | undefined>>): BenchPaths {
  const root = repoRoot();
  const dist = join(root, 'bench', 'dist');
  const override = (name: string): string | undefined =>
    env[name] !== undefined && env[name] !== '' ? env[name] : undefined;
  return {
    root,
    // Overrides point at another build of a daemon, to measure a proposed change against the same harness.
    orchestratord: override('LLORCH_BENCH_ORCHESTRATORD') ?? join(root, 'apps', 'orchestratord', 'dist', 'main.js'),
    poolManagerd: override('LLORCH_BENCH_POOL_MANAGERD') ?? join(root, 'apps', 'pool-managerd', 'dist', 'main.js'),
    placementBench: join(root, 'apps', 'orchestratord', 'dist', 'bench', 'placement-bench.js'),
    fixturePoolManager: join(root, 'packages', 'fixture-pool-manager', 'dist', 'fixture-pool-manager-main.js'),
    passthroughProxy: join(dist, 'fixtures', 'passthrough-proxy-main.js'),
    streamClient: join(dist, 'load', 'stream-client-main.js'),
    cacheDir:
      env.LLORCH_TEST_CACHE_DIR !== undefined && env.LLORCH_TEST_CACHE_DIR !== ''
        ? env.LLORCH_TEST_CACHE_DIR
        : join(root, '.cache', 'llama-orch'),
    workDir: join(root, 'bench', '.work'),
    overridden:
      override('LLORCH_BENCH_ORCHESTRATORD') !== undefined || override('LLORCH_BENCH_POOL_MANAGERD') !== undefined,
    resultsDir: join(root, 'bench', 'results'),
    readme: join(root, 'README.md'),
    performancePage: join(root, 'docs', 'performance.md'),
  };
}
