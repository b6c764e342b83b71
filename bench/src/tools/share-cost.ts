#!/usr/bin/env node
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { startRedisServer } from '@llama-orch/daemon-support/redis-server';
import { createCpuCap, type CpuCap } from '../lib/cpu-cap.js';
import { newToken, startOrchestratord, waitPoolsReady } from '../lib/cluster.js';
import type { Daemon } from '../lib/daemon.js';
import { startFixtureNode } from '../lib/fixture.js';
import { relayLoopWindow } from '../lib/relay-loop.js';
import { benchPaths } from '../lib/repo.js';
import { numberOption } from '../lib/tool-args.js';

/**
 * `node bench/dist/tools/share-cost.js [--seconds=8] [--streams=10] [--rounds=4] [--prof]`: what
 * sharing a cluster costs a replica per relayed token, uncapped. Replicas A and B share one Redis
 * prefix; replica C (the twin) has a prefix of its own; each cluster has its FIXTURE node. Rounds
 * alternate "A and B loaded" with "A and its twin C loaded" (the same load on the machine, nothing
 * shared), and print A's CPU per token in each. `--prof` runs A under `--cpu-prof`. A diagnostic:
 * nothing is written to bench/results.
 */
const args = process.argv.slice(2);
const option = (name: string, fallback: number): number => numberOption(args, name, fallback);
const seconds = option('seconds', 8);
const streams = option('streams', 10);
const rounds = option('rounds', 4);
const prof = args.includes('--prof');
// --cap=0.1: each replica in a cgroup capped at that many cores (as the scale rounds of `pnpm bench replicas`); 0 = uncapped.
const capCores = option('cap', 0);
const only = args.find((a) => a.startsWith('--only='))?.slice(7);
const tokenIntervalMs = option('interval', 4);
const paths = benchPaths(process.env);
const dir = join(paths.workDir, `share-cost-${Date.now()}`);
await mkdir(dir, { recursive: true });
const token = newToken();
const redis = await startRedisServer();
const daemons: Daemon[] = [];
const caps: CpuCap[] = [];
try {
  const replica = (id: string, prefix: string): Promise<Daemon> =>
    startOrchestratord({
      paths,
      dir,
      token,
      heartbeatMs: 5000,
      name: `replica-${id}`,
      env: { ORCHD_REDIS_URL: redis.url, ORCHD_REDIS_PREFIX: prefix, ORCHD_REPLICA_ID: `replica-${id}` },
      nodeFlags:
        prof && id === 'a' ? ['--cpu-prof', `--cpu-prof-dir=${dir}`, '--cpu-prof-name=replica-a.cpuprofile'] : [],
    });
  const [a, b, c] = [await replica('a', 'share:'), await replica('b', 'share:'), await replica('c', 'twin:')];
  daemons.push(a, b, c);
  if (capCores > 0)
    for (const r of [a, b, c]) {
      const cap = await createCpuCap(`llorch-share-${process.pid}-${r.pid}`, capCores);
      caps.push(cap);
      await cap.add(r.pid);
    }
  // --split: the shared cluster's nodes in two FIXTURE processes (one per replica's worth of load), as the twin has its own.
  const split = args.includes('--split');
  const fixtures = new Map<string, Daemon>();
  for (const [prefix, r] of [['share', a], ...(split ? ([['share2', a]] as const) : []), ['twin', c]] as const) {
    const f = await startFixtureNode(paths, dir, {
      orchestratorUrl: r.url,
      token,
      nodes: 2,
      slotsPerPool: 64,
      model: 'fixture:share',
      mode: 'stream',
      tokenIntervalMs,
      heartbeatMs: 5000,
      idPrefix: prefix,
    });
    daemons.push(f);
    fixtures.set(prefix, f);
    await waitPoolsReady(r.url, token, [`${prefix}-0`, `${prefix}-1`], daemons, 30_000);
  }
  await waitPoolsReady(b.url, token, ['share-0', 'share-1'], daemons, 30_000);
  const load = {
    clients: 2,
    streamsPerClient: Math.ceil(streams / 2),
    model: 'fixture:share',
    maxTokens: 200,
    inline: true,
  };
  const window = (r: Daemon, extra: number[] = []) =>
    relayLoopWindow({
      clientScript: paths.streamClient,
      url: r.url,
      token,
      load,
      settleS: 2,
      windowS: seconds,
      pids: [r.pid, ...extra],
    });
  const usPerToken = { shared: [] as number[], twin: [] as number[] };
  for (let round = 0; round < rounds; round++) {
    for (const mode of (round % 2 === 0 ? (['shared', 'twin'] as const) : (['twin', 'shared'] as const)).filter(
      (m) => only === undefined || m === only,
    )) {
      const fx =
        mode === 'shared'
          ? [fixtures.get('share'), fixtures.get('share2')]
          : [fixtures.get('share'), fixtures.get('twin')];
      const [wa, wo] = await Promise.all([
        window(
          a,
          fx.filter((f) => f !== undefined).map((f) => f.pid),
        ),
        window(mode === 'shared' ? b : c),
      ]);
      const us = ((wa.cpuS[0] ?? 0) * 1e6) / wa.tokens;
      usPerToken[mode].push(us);
      process.stdout.write(
        `round ${round} ${mode}: A ${Math.round(wa.tokens / wa.seconds)} tokens/s at ${us.toFixed(1)} µs/token; other ${Math.round(wo.tokens / wo.seconds)} tokens/s at ${(((wo.cpuS[0] ?? 0) * 1e6) / wo.tokens).toFixed(1)} µs/token; FIXTURE cores ${wa.cpuS
          .slice(1)
          .map((x) => (x / wa.seconds).toFixed(2))
          .join('/')}\n`,
      );
      await new Promise((r) => setTimeout(r, 1000));
    }
  }
  const med = (xs: number[]): number => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)] ?? NaN;
  process.stdout.write(
    `A's µs/token, median: shared ${med(usPerToken.shared).toFixed(1)}, twin ${med(usPerToken.twin).toFixed(1)}, shared ÷ twin ${(med(usPerToken.shared) / med(usPerToken.twin)).toFixed(3)}\n`,
  );
} finally {
  for (const d of daemons.reverse()) await d.stop();
  for (const cap of caps) await cap.remove();
  await redis.stop();
  process.stdout.write(`run dir ${dir}\n`);
}
