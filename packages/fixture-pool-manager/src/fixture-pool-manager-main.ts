#!/usr/bin/env node
import { FixtureFleet, type FixtureFleetOptions } from './fixture-fleet.js';

/**
 * FIXTURE process entry: `node fixture-pool-manager-main.js '<FixtureFleetOptions JSON>'`. Logs one
 * JSON line `{"msg":"listening","url":<first node>,"nodes":[…],"pid":…}` once every virtual node
 * registered; SIGTERM or SIGINT closes the fleet and exits.
 */
function parseOptions(raw: string | undefined): FixtureFleetOptions {
  if (raw === undefined) throw new Error('usage: fixture-pool-manager-main <options JSON>');
  const o = JSON.parse(raw) as Partial<FixtureFleetOptions>;
  const problems: string[] = [];
  if (typeof o.orchestratorUrl !== 'string') problems.push('orchestratorUrl');
  if (typeof o.token !== 'string') problems.push('token');
  for (const k of ['nodes', 'slotsPerPool', 'tokenIntervalMs', 'heartbeatMs'] as const) {
    if (typeof o[k] !== 'number' || !(o[k] > 0)) problems.push(k);
  }
  if (typeof o.model !== 'string') problems.push('model');
  if (o.mode !== 'stream' && o.mode !== 'busy') problems.push('mode');
  if (o.idPrefix !== undefined && typeof o.idPrefix !== 'string') problems.push('idPrefix');
  if (problems.length > 0) throw new Error(`fixture options invalid: ${problems.join(', ')}`);
  return o as FixtureFleetOptions;
}

/** A close that has not finished by then (a stuck socket) does not keep the process alive. */
const CLOSE_DEADLINE_MS = 5_000;

const fleet = new FixtureFleet(parseOptions(process.argv[2]));
const stop = (): void => {
  setTimeout(() => process.exit(1), CLOSE_DEADLINE_MS).unref();
  void fleet.close().then(() => process.exit(0));
};
process.once('SIGTERM', stop);
process.once('SIGINT', stop);
fleet.start().then(
  () =>
    process.stdout.write(
      `${JSON.stringify({ msg: 'listening', url: fleet.urls[0], nodes: fleet.nodeIds, pid: process.pid })}\n`,
    ),
  (err: unknown) => {
    process.stderr.write(`fixture pool-managerd failed: ${(err as Error).stack ?? String(err)}\n`);
    process.exit(1);
  },
);
