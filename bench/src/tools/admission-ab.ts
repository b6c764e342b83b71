#!/usr/bin/env node
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { loadavg } from 'node:os';
import { startRedisServer } from '@llama-orch/daemon-support/redis-server';
import type { FileLoggedDaemon } from '@llama-orch/daemon-support/daemon-launcher';
import { admissionPhase } from '../lib/admission-load.js';
import { newToken, startOrchestratord, waitPoolsReady } from '../lib/cluster.js';
import { cpuSeconds } from '../lib/proc.js';
import { benchPaths } from '../lib/repo.js';
import { BUSY_MODEL, HEARTBEAT_MS, startBusyNode } from '../lib/store-compare.js';
import { median, summarize } from '../lib/stats.js';
import { numberOption } from '../lib/tool-args.js';

/**
 * `node bench/dist/tools/admission-ab.js [--rounds=6] [--seconds=5] [--prof] NAME=PATH[:memory] …`: the
 * replicas benchmark's admission load (bench/src/lib/admission-load.ts: 10 connections, each POST
 * /v2/tasks for a busy model then its cancel) on several orchestratord builds at once — PATH is a
 * build's `dist/main.js`, on one redis-server (each its own prefix) or, with `:memory`, the
 * in-process store — loaded in turn, the order reversed every round after a discarded warm-up, so
 * a change is measured against its baseline under the same machine load (a copy of the old
 * `apps/orchestratord/dist` beside a `package.json` and a `node_modules` link runs as it is).
 * Prints each round and, per build, tasks/s by round, admission p50/p90/p99 over all rounds and
 * orchestratord CPU µs per admitted (and cancelled) task. A diagnostic: nothing is written to
 * bench/results.
 */

interface Build {
  readonly name: string;
  readonly orch: FileLoggedDaemon;
  readonly busy: FileLoggedDaemon;
}

const args = process.argv.slice(2);
const option = (name: string, fallback: number): number => numberOption(args, name, fallback);
const rounds = option('rounds', 6);
// --prof: each orchestratord under --cpu-prof (NAME.cpuprofile in the run dir, for cpuprofile-top.js)
const prof = args.includes('--prof');
const seconds = option('seconds', 5);
const specs = args.filter((a) => !a.startsWith('--'));
if (specs.length === 0 || specs.some((s) => !/^[\w-]+=.+/.test(s))) {
  process.stderr.write(
    'usage: node bench/dist/tools/admission-ab.js [--rounds=N] [--seconds=N] NAME=PATH/dist/main.js[:memory] …\n',
  );
  process.exit(2);
}

const paths = benchPaths(process.env);
const dir = join(paths.workDir, `admission-ab-${new Date().toISOString().replace(/[:.]/g, '-')}`);
await mkdir(dir, { recursive: true });
const redis = await startRedisServer();
const token = newToken();
const builds: Build[] = [];
try {
  for (const spec of specs) {
    const [name = '', rest = ''] = spec.split(/=(.*)/s);
    const memory = rest.endsWith(':memory');
    const script = memory ? rest.slice(0, -':memory'.length) : rest;
    const env: Record<string, string> = { ORCHD_DRAIN_GRACE_MS: '1000' };
    if (!memory)
      Object.assign(env, {
        ORCHD_REDIS_URL: redis.url,
        ORCHD_REDIS_PREFIX: `ab-${name}:`,
        ORCHD_REPLICA_ID: `ab-${name}`,
      });
    const orch = await startOrchestratord({
      paths: { ...paths, orchestratord: script },
      dir,
      token,
      heartbeatMs: HEARTBEAT_MS,
      name: `orchestratord-${name}`,
      env,
      nodeFlags: prof ? ['--cpu-prof', `--cpu-prof-dir=${dir}`, `--cpu-prof-name=${name}.cpuprofile`] : [],
    });
    const busy = await startBusyNode(paths, dir, orch.url, token, `${name}-busy`);
    builds.push({ name, orch, busy });
    await waitPoolsReady(orch.url, token, [`${name}-busy-0`], [orch, busy], 30_000);
  }
  for (const b of builds) await admissionPhase(b.orch.url, token, BUSY_MODEL, 8, 10);
  const out = new Map(
    builds.map((b) => [b.name, { latencies: [] as number[], tps: [] as number[], cpu: [] as number[] }]),
  );
  for (let r = 0; r < rounds; r++) {
    for (const b of r % 2 === 0 ? builds : [...builds].reverse()) {
      const cpu0 = cpuSeconds(b.orch.pid);
      const p = await admissionPhase(b.orch.url, token, BUSY_MODEL, seconds, 10);
      const cpuUs = ((cpuSeconds(b.orch.pid) - cpu0) * 1e6) / Math.max(1, p.admitted);
      const o = out.get(b.name);
      o?.latencies.push(...p.latencies);
      o?.tps.push(p.admitted / p.result.duration);
      o?.cpu.push(cpuUs);
      const s = summarize(p.latencies);
      process.stdout.write(
        `round ${r} ${b.name}: ${Math.round(p.admitted / p.result.duration)} tasks/s, p50 ${s.p50.toFixed(2)} p99 ${s.p99.toFixed(2)} ms, ${Math.round(cpuUs)} µs CPU/task, load ${loadavg()[0]?.toFixed(1)}\n`,
      );
    }
  }
  for (const [name, o] of out) {
    const s = summarize(o.latencies);
    process.stdout.write(
      `${name}: tasks/s ${o.tps.map(Math.round).join(', ')} (median ${Math.round(median(o.tps))}); p50 ${s.p50.toFixed(2)} p90 ${s.p90.toFixed(2)} p99 ${s.p99.toFixed(2)} ms; ` +
        `CPU µs/task ${o.cpu.map(Math.round).join(', ')} (median ${Math.round(median(o.cpu))})\n`,
    );
  }
} finally {
  for (const b of builds) {
    await b.busy.stop();
    await b.orch.stop();
  }
  await redis.stop();
  process.stdout.write(`run dir ${dir}\n`);
}
