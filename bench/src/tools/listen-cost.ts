#!/usr/bin/env node
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { startRedisServer } from '@llama-orch/daemon-support/redis-server';
import { newToken, startOrchestratord, waitPoolsReady } from '../lib/cluster.js';
import type { Daemon } from '../lib/daemon.js';
import { startFixtureNode } from '../lib/fixture.js';
import { cpuSeconds, threadCpu } from '../lib/proc.js';
import { relayLoopWindow } from '../lib/relay-loop.js';
import { benchPaths } from '../lib/repo.js';
import { numberOption } from '../lib/tool-args.js';

/**
 * `node bench/dist/tools/listen-cost.js [--seconds=10] [--streams=20] [--prof]`: what one replica
 * pays for another replica's traffic. Replicas A and B share one Redis prefix; a FIXTURE node
 * (stream mode) registers through A. Phase 1: nothing loaded (both replicas' idle CPU). Phase 2: a
 * closed loop of /v2 streams through A only; B, idle, hears A's lease and queue signals. Prints B's
 * CPU in each phase and per task A ended. `--prof` runs B under `--cpu-prof`, `--heap-prof`
 * under the sampling heap profiler (allocations), both written to the run dir. A diagnostic: nothing is written to bench/results.
 */
const args = process.argv.slice(2);
const option = (name: string, fallback: number): number => numberOption(args, name, fallback);
const seconds = option('seconds', 10);
const streams = option('streams', 20);
const prof = args.includes('--prof');
const heapProf = args.includes('--heap-prof');
const paths = benchPaths(process.env);
const dir = join(paths.workDir, `listen-cost-${Date.now()}`);
await mkdir(dir, { recursive: true });
const token = newToken();
const redis = await startRedisServer();
const daemons: Daemon[] = [];
/** CPU seconds of each thread of `pid`, by thread name (threads of one name summed). */
function threadCpuByName(pid: number): Map<string, number> {
  const out = new Map<string, number>();
  for (const t of threadCpu(pid)) out.set(t.name, (out.get(t.name) ?? 0) + t.seconds);
  return out;
}
const threadDelta = (before: Map<string, number>, after: Map<string, number>, s: number): string =>
  [...after]
    .map(([name, v]) => [name, ((v - (before.get(name) ?? 0)) / s) * 1000] as const)
    .filter(([, ms]) => ms >= 0.05)
    .sort((x, y) => y[1] - x[1])
    .map(([name, ms]) => `${name} ${ms.toFixed(2)}`)
    .join(', ');
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
try {
  const env = (id: string): Record<string, string> => ({
    ORCHD_REDIS_URL: redis.url,
    ORCHD_REDIS_PREFIX: 'listen:',
    ORCHD_REPLICA_ID: `replica-${id}`,
  });
  const a = await startOrchestratord({ paths, dir, token, heartbeatMs: 5000, name: 'replica-a', env: env('a') });
  daemons.push(a);
  const b = await startOrchestratord({
    paths,
    dir,
    token,
    heartbeatMs: 5000,
    name: 'replica-b',
    env: env('b'),
    nodeFlags: [
      ...(prof ? ['--cpu-prof', `--cpu-prof-dir=${dir}`, '--cpu-prof-name=replica-b.cpuprofile'] : []),
      ...(heapProf
        ? [
            '--heap-prof',
            '--heap-prof-interval=4096',
            `--heap-prof-dir=${dir}`,
            '--heap-prof-name=replica-b.heapprofile',
          ]
        : []),
    ],
  });
  daemons.push(b);
  daemons.push(
    await startFixtureNode(paths, dir, {
      orchestratorUrl: a.url,
      token,
      nodes: 2,
      slotsPerPool: 64,
      model: 'fixture:listen',
      mode: 'stream',
      tokenIntervalMs: 4,
      heartbeatMs: 5000,
      idPrefix: 'listen',
    }),
  );
  await waitPoolsReady(b.url, token, ['listen-0', 'listen-1'], daemons, 30_000);
  process.stdout.write(`pids: A ${a.pid}, B ${b.pid}\n`);
  await sleep(2000);
  const cpu = (d: Daemon): number => cpuSeconds(d.pid);
  const a0 = cpu(a);
  const b0 = cpu(b);
  const t0 = threadCpuByName(b.pid);
  await sleep(seconds * 1000);
  process.stdout.write(`  B's threads, ms CPU/s: ${threadDelta(t0, threadCpuByName(b.pid), seconds)}\n`);
  process.stdout.write(
    `idle ${seconds} s: A ${(((cpu(a) - a0) / seconds) * 1000).toFixed(2)} ms CPU/s, B ${(((cpu(b) - b0) / seconds) * 1000).toFixed(2)} ms CPU/s\n`,
  );
  const t1 = threadCpuByName(b.pid);
  const w = await relayLoopWindow({
    clientScript: paths.streamClient,
    url: a.url,
    token,
    load: { clients: 2, streamsPerClient: streams / 2, model: 'fixture:listen', maxTokens: 200, inline: true },
    settleS: 2,
    windowS: seconds,
    pids: [a.pid, b.pid],
  });
  const [ca = 0, cb = 0] = w.cpuS;
  process.stdout.write(
    `  B's threads (settle and window), ms CPU/s: ${threadDelta(t1, threadCpuByName(b.pid), w.seconds + 2)}\n`,
  );
  process.stdout.write(
    `A loaded: ${Math.round(w.tokens / w.seconds)} tokens/s, ${(w.tasksEnded / w.seconds).toFixed(1)} tasks/s ended; A ${((ca / w.seconds) * 1000).toFixed(1)} ms CPU/s, ` +
      `B ${((cb / w.seconds) * 1000).toFixed(2)} ms CPU/s = ${((cb * 1e6) / Math.max(1, w.tasksEnded)).toFixed(0)} µs per task A ended\n`,
  );
} finally {
  for (const d of daemons.reverse()) await d.stop();
  await redis.stop();
  process.stdout.write(`run dir ${dir}\n`);
}
