#!/usr/bin/env node
// DIAGNOSTIC (not a benchmark): non-streamed 128-token chats through the door, two bare node:http
// hops (`floor`), two bare TCP pipes (`pipe`: no HTTP) and the engine directly, interleaved, plus
// idle windows as long as a door request, to split the daemons' CPU per request into the request's
// own and their background (heartbeats, timers).
// `node bench/dist/tools/answer-cpu.js [rounds] [--cpu-prof]`
import { spawn } from 'node:child_process';
import { mkdtemp } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Agent } from 'undici';
import { answerGeneration, engineAnswerBody } from '../lib/answer-variants.js';
import {
  newToken,
  poolStatus,
  SYNTHETIC_MODEL,
  startOrchestratord,
  startPoolManagerd,
  waitNodeIdle,
  waitPoolsReady,
} from '../lib/cluster.js';
import { startPassthroughProxy, startTcpPipe } from '../lib/fixture.js';
import { cpuSeconds, threadCpu } from '../lib/proc.js';
import { benchPaths } from '../lib/repo.js';

const rounds = Number(process.argv[2] ?? 60);
const prof = process.argv.includes('--cpu-prof');
const paths = benchPaths(process.env);
const dir = await mkdtemp(join(paths.workDir, 'answer-cpu-'));
const token = newToken();
const profFlags = (n: string): string[] => [
  ...(process.env.ANSWER_CPU_NODE_FLAGS ?? '').split(' ').filter(Boolean),
  ...(prof ? ['--cpu-prof', `--cpu-prof-dir=${dir}`, `--cpu-prof-name=${n}.cpuprofile`] : []),
];
const orch = await startOrchestratord({ paths, dir, token, heartbeatMs: 1000, nodeFlags: profFlags('orch') });
const pm = await startPoolManagerd({
  paths,
  dir,
  nodeId: 'n',
  token,
  orchestratorUrl: orch.url,
  heartbeatMs: 1000,
  pools: [
    {
      id: 'p',
      slots: 1,
      determinism: true,
      threads: 1,
      extraFlags: (process.env.ANSWER_CPU_ENGINE_FLAGS ?? '').split(' ').filter(Boolean),
    },
  ],
  nodeFlags: profFlags('pm'),
});
await waitPoolsReady(orch.url, token, ['p'], [orch, pm.daemon], 600_000);
const engineUrl = (await poolStatus(pm, 'p', token))?.engine_url as string;
const inner = await startPassthroughProxy(paths, dir, 'i', engineUrl, 'keepalive');
const outer = await startPassthroughProxy(paths, dir, 'o', inner.url, 'keepalive');
const pipeInner = await startTcpPipe(paths, dir, 'i', engineUrl);
const pipeOuter = await startTcpPipe(paths, dir, 'o', pipeInner.url);
const agent = new Agent({ keepAliveTimeout: 30_000 });
const PROMPT = 'Once upon a time, in a data centre far away,';
const cpu = { door: 0, floor: 0, pipe: 0, idle: 0 };
const lat = { door: [] as number[], floor: [] as number[], pipe: [] as number[], direct: [] as number[] };
const pids = {
  door: [orch.pid, pm.daemon.pid],
  floor: [outer.pid, inner.pid],
  pipe: [pipeOuter.pid, pipeInner.pid],
  idle: [orch.pid, pm.daemon.pid],
};
const urlOf = { door: orch.url, floor: outer.url, pipe: pipeOuter.url };
// ANSWER_CPU_STRACE=1: count the daemons' system calls over the measured rounds (strace -c, in dir).
const tracers =
  process.env.ANSWER_CPU_STRACE === '1'
    ? [orch.pid, pm.daemon.pid].map((pid) =>
        spawn(
          'strace',
          [
            ...(process.env.ANSWER_CPU_STRACE_ARGS ?? '-c').split(' '),
            '-f',
            '-p',
            String(pid),
            '-o',
            join(dir, `strace-${pid}.txt`),
          ],
          { stdio: 'ignore' },
        ),
      )
    : [];
if (tracers.length > 0) await sleep(1000);
// ANSWER_CPU_PAUSE: ms metered after each request (its deferred work: log flush); ANSWER_CPU_SETTLE: ms waited, unmetered, before each.
const pauseMs = Number(process.env.ANSWER_CPU_PAUSE ?? 10);
// ANSWER_CPU_TOKENS: tokens an answer (1: the engine answers at once, so the daemons never sit idle long).
const maxTokens = Number(process.env.ANSWER_CPU_TOKENS ?? 128);
const settleMs = Number(process.env.ANSWER_CPU_SETTLE ?? 0);
const sum = (ps: number[]): number => ps.reduce((s, p) => s + cpuSeconds(p), 0);
// Per-thread CPU of each daemon over the measured rounds (which thread pays: main, GC helpers, libuv pool).
const threads = (pid: number): Map<string, number> =>
  new Map(threadCpu(pid).map((t) => [`${t.name}:${t.tid}`, t.seconds * 1e9]));
let threadsBefore: Map<string, number>[] = [];
for (let i = 0; i < rounds + 5; i++) {
  const seed = 1000 + i;
  const body = engineAnswerBody('chat', PROMPT, maxTokens, seed);
  const door = { model: SYNTHETIC_MODEL, messages: body.messages, max_tokens: maxTokens, seed, temperature: 0 };
  let doorMs = 100;
  // ANSWER_CPU_ONLY=door: door requests alone (to trace them).
  if (i === 5) threadsBefore = [orch.pid, pm.daemon.pid].map(threads);
  for (const v of process.env.ANSWER_CPU_ONLY === 'door'
    ? (['door'] as const)
    : (['door', 'floor', 'pipe', 'direct', 'idle'] as const)) {
    if (settleMs > 0) await sleep(settleMs);
    const before = v === 'direct' ? 0 : sum(pids[v]);
    if (v === 'idle') await sleep(doorMs);
    else {
      const a = await answerGeneration(
        v === 'direct' ? engineUrl : urlOf[v],
        'chat',
        v === 'door' ? door : body,
        agent,
        v === 'door' ? { token } : { reset: v === 'direct' },
      );
      if (i >= 5) lat[v].push(a.endAt - a.sentAt);
      if (v === 'door') doorMs = a.endAt - a.sentAt;
    }
    await sleep(pauseMs);
    if (v !== 'direct' && i >= 5) cpu[v] += sum(pids[v]) - before;
    await waitNodeIdle(orch.url, token, 'n', 10_000);
  }
}
for (const t of tracers) t.kill('SIGINT');
if (tracers.length > 0) await sleep(1000);
const med = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;
const perThread = [orch.pid, pm.daemon.pid].map((pid, k) =>
  Object.fromEntries(
    [...threads(pid)]
      .map(([t, ns]) => [t, Math.round((ns - (threadsBefore[k]?.get(t) ?? 0)) / rounds) / 1e6])
      .filter(([, ms]) => (ms as number) > 0.001),
  ),
);
const out = {
  rounds,
  per_thread_ms_per_round: { orchestratord: perThread[0], pool_managerd: perThread[1] },
  cpu_ms_per_request: Object.fromEntries(
    Object.entries(cpu).map(([k, s]) => [k, Math.round((s * 1e6) / rounds) / 1e3]),
  ),
  latency_p50_ms: Object.fromEntries(Object.entries(lat).map(([k, xs]) => [k, Math.round(med(xs) * 1000) / 1000])),
  dir,
};
process.stdout.write(`${JSON.stringify(out)}\n`);
// ANSWER_CPU_BURST=N: then N door answers back to back, N through the floor, alternating 6 times:
// the CPU per request of processes that never sit idle between requests (no wake-up after idle).
const burst = Number(process.env.ANSWER_CPU_BURST ?? 0);
if (burst > 0) {
  const warm = { door: 0, floor: 0, pipe: 0 };
  for (let k = 0; k < 6; k++) {
    for (const v of ['door', 'floor', 'pipe'] as const) {
      const before = sum(pids[v]);
      for (let i = 0; i < burst; i++) {
        const seed = 5000 + i;
        const body = engineAnswerBody('chat', PROMPT, maxTokens, seed);
        const door = { model: SYNTHETIC_MODEL, messages: body.messages, max_tokens: maxTokens, seed, temperature: 0 };
        await answerGeneration(urlOf[v], 'chat', v === 'door' ? door : body, agent, v === 'door' ? { token } : {});
      }
      if (k > 0) warm[v] += sum(pids[v]) - before;
      await waitNodeIdle(orch.url, token, 'n', 10_000);
    }
  }
  process.stdout.write(
    `${JSON.stringify({ burst, back_to_back_cpu_ms_per_request: Object.fromEntries(Object.entries(warm).map(([v, s]) => [v, Math.round((s * 1e6) / (5 * burst)) / 1e3])) })}\n`,
  );
}
await agent.close();
for (const d of [outer, inner, pipeOuter, pipeInner]) await d.stop();
await pm.daemon.stop();
await orch.stop();
