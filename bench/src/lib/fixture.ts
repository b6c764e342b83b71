import { join } from 'node:path';
import type { FixtureFleetOptions } from '@llama-orch/fixture-pool-manager';
import { launchDaemon, type FileLoggedDaemon as Daemon } from '@llama-orch/daemon-support/daemon-launcher';
import type { BenchPaths } from './repo.js';

/** Starts the FIXTURE node process (virtual nodes registered with orchestratord). */
export async function startFixtureNode(
  paths: BenchPaths,
  dir: string,
  options: FixtureFleetOptions,
  nofile?: number,
): Promise<Daemon> {
  return launchDaemon(
    {
      name: `fixture-node:${options.idPrefix ?? 'fixture'}`,
      script: paths.fixturePoolManager,
      args: [JSON.stringify(options)],
      output: { file: join(dir, `fixture-node-${options.idPrefix ?? 'fixture'}.log`) },
      envMode: 'minimal',
      ...(nofile !== undefined ? { nofile } : {}),
    },
    { timeoutMs: 60_000 },
  );
}

/** Starts a FIXTURE pass-through proxy to `target` (`keepalive`: reuse upstream connections). */
export async function startPassthroughProxy(
  paths: BenchPaths,
  dir: string,
  name: string,
  target: string,
  upstream: 'keepalive' | 'close',
): Promise<Daemon> {
  return launchDaemon(
    {
      name: `passthrough:${name}`,
      script: paths.passthroughProxy,
      args: [target, upstream],
      output: { file: join(dir, `passthrough-${name}.log`) },
      envMode: 'minimal',
    },
    { timeoutMs: 30_000 },
  );
}
