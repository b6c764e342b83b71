import { join } from 'node:path';
import type { FixtureNodeOptions } from '../fixtures/fixture-node.js';
import { spawnDaemon, type Daemon } from './daemon.js';
import type { BenchPaths } from './repo.js';

/** Starts the FIXTURE node process (virtual nodes registered with orchestratord). */
export async function startFixtureNode(
  paths: BenchPaths,
  dir: string,
  options: FixtureNodeOptions,
  nofile?: number,
): Promise<Daemon> {
  return spawnDaemon({
    name: `fixture-node:${options.idPrefix ?? 'fixture'}`,
    script: paths.fixtureNode,
    args: [JSON.stringify(options)],
    logFile: join(dir, `fixture-node-${options.idPrefix ?? 'fixture'}.log`),
    ...(nofile !== undefined ? { nofile } : {}),
    timeoutMs: 60_000,
  });
}

/** Starts a FIXTURE pass-through proxy to `target` (`keepalive`: reuse upstream connections). */
export async function startPassthroughProxy(
  paths: BenchPaths,
  dir: string,
  name: string,
  target: string,
  upstream: 'keepalive' | 'close',
): Promise<Daemon> {
  return spawnDaemon({
    name: `passthrough:${name}`,
    script: paths.passthroughProxy,
    args: [target, upstream],
    logFile: join(dir, `passthrough-${name}.log`),
    timeoutMs: 30_000,
  });
}
