import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import autocannon, { type AutocannonResult } from 'autocannon';
import { Pool } from 'undici';
import { BenchError } from '../errors.js';
import { newToken, startOrchestratord, waitPoolsReady } from '../lib/cluster.js';
import { profFlags, type Bench, type BenchContext } from '../lib/context.js';
import { cpuSeconds } from '../lib/proc.js';
import { startFixtureNode } from '../lib/fixture.js';
import type { BenchOutcome } from '../lib/result.js';
import { rounded, summarize } from '../lib/stats.js';

const MODEL = 'fixture:busy';

interface PhaseResult {
  result: AutocannonResult;
  latencies: number[];
  admitted: number;
  canceled: number;
  maxBacklog: number;
  otherStatus: Record<string, number>;
  sampleBodies: string[];
}

/**
 * One autocannon phase: POST /v2/tasks with a fresh task per request; every 202 is cancelled by a
 * concurrent loop (POST /v2/tasks/{id}/cancel), so the queue stays short.
 */
async function phase(orchUrl: string, token: string, seconds: number, connections: number): Promise<PhaseResult> {
  const backlog: string[] = [];
  let maxBacklog = 0;
  let admitted = 0;
  let canceled = 0;
  const otherStatus: Record<string, number> = {};
  const sampleBodies: string[] = [];
  const latencies: number[] = [];
  const pool = new Pool(orchUrl, { connections: 4, pipelining: 1, keepAliveTimeout: 30_000 });
  let running = true;
  const cancelLoop = async (): Promise<void> => {
    while (running || backlog.length > 0) {
      const id = backlog.shift();
      if (id === undefined) {
        await sleep(1);
        continue;
      }
      const res = await pool.request({ method: 'POST', path: `/v2/tasks/${id}/cancel`, headers: { authorization: `Bearer ${token}` } });
      await res.body.dump();
      if (res.statusCode === 204) canceled += 1;
    }
  };
  const cancellers = Array.from({ length: 4 }, () => cancelLoop());
  const body = (): string => JSON.stringify({
    task_id: randomUUID(),
    session_id: randomUUID(),
    workload: 'completion',
    model_ref: MODEL,
    engine: 'llamacpp',
    ctx: 0,
    priority: 'interactive',
    prompt: 'Write a haiku about queues.',
    max_tokens: 32,
    deadline_ms: 3_600_000,
  });
  const instance = autocannon({
    url: orchUrl,
    connections,
    pipelining: 1,
    duration: seconds,
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    requests: [{
      method: 'POST',
      path: '/v2/tasks',
      setupRequest: (req) => ({ ...req, body: body() }),
      onResponse: (status, text) => {
        if (status === 202) {
          admitted += 1;
          backlog.push((JSON.parse(text) as { task_id: string }).task_id);
          if (backlog.length > maxBacklog) maxBacklog = backlog.length;
        } else {
          otherStatus[status] = (otherStatus[status] ?? 0) + 1;
          if (sampleBodies.length < 3) sampleBodies.push(`${status} ${text.slice(0, 300)}`);
        }
      },
    }],
  });
  instance.on('response', (_client: unknown, status: number, _bytes: number, ms: number) => {
    if (status === 202) latencies.push(ms);
  });
  const result = await instance;
  running = false;
  await Promise.all(cancellers);
  await pool.close();
  return { result, latencies, admitted, canceled, maxBacklog, otherStatus, sampleBodies };
}

export const admissionBench: Bench = {
  name: 'admission',
  title: 'Admission throughput',
  targets: [
    { figure: 'tasks_per_s', op: '>=', value: 10_000, unit: 'tasks/s' },
    { figure: 'latency_p99', op: '<=', value: 5, unit: 'ms' },
  ],
  async run(ctx: BenchContext): Promise<BenchOutcome> {
    const dir = ctx.dir;
    const token = newToken();
    const orch = await startOrchestratord({
      paths: ctx.paths, dir, token, heartbeatMs: 1000,
      env: { ORCHD_ADMISSION_CAPACITY: '1000000' },
      nodeFlags: profFlags(ctx, 'admission-orchestratord'),
    });
    const fixture = await startFixtureNode(ctx.paths, dir, {
      orchestratorUrl: orch.url, token, nodes: 1, slotsPerPool: 1, model: MODEL, mode: 'busy', tokenIntervalMs: 1000, heartbeatMs: 1000, idPrefix: 'busy',
    });
    try {
      await waitPoolsReady(orch.url, token, ['busy-0'], [orch, fixture], 30_000);
      const connections = 10;
      const seconds = ctx.quick ? 3 : 10;
      ctx.log(`admission: warm-up 3 s, then ${seconds} s of autocannon (${connections} connections) with a concurrent cancel loop`);
      await phase(orch.url, token, 3, connections);
      await sleep(500);
      const cpu0 = cpuSeconds(orch.pid);
      const p = await phase(orch.url, token, seconds, connections);
      const orchCpu = cpuSeconds(orch.pid) - cpu0;
      if (p.admitted === 0) throw new BenchError(`no task admitted: ${JSON.stringify(p.otherStatus)} errors ${p.result.errors}: ${p.sampleBodies.join(' | ')}`);
      const lat = summarize(p.latencies);
      const tasksPerS = p.admitted / p.result.duration;
      return {
        method:
          `autocannon (${connections} connections, no pipelining, ${seconds} s after a 3 s warm-up) POSTs /v2/tasks with a fresh ` +
          `task_id/session_id per request for model '${MODEL}', served by one FIXTURE node whose pool is ready with 0 free ` +
          'slots, so every task is admitted (202) and waits in the queue; a concurrent loop in the same client process (4 ' +
          'connections) cancels each admitted task (POST /v2/tasks/{id}/cancel → 204), so orchestratord serves a cancel for ' +
          'every admission and the queue stays short. orchestratord logs at info (its default) to a file; admission ' +
          'capacity 1,000,000 so no request is refused. Tasks/s = 202s ÷ duration; latency = each 202\'s response time ' +
          '(send → full response) recorded by autocannon.',
        samples: { admissions: p.admitted, seconds },
        figures: {
          tasks_per_s: { label: 'tasks admitted per second', value: tasksPerS, unit: 'tasks/s' },
          latency_p50: { label: 'admission latency p50', value: lat.p50, unit: 'ms' },
          latency_p99: { label: 'admission latency p99', value: lat.p99, unit: 'ms' },
        },
        details: {
          latency_ms: rounded(lat),
          autocannon: {
            requests_per_s: p.result.requests.average, errors: p.result.errors, timeouts: p.result.timeouts, non2xx: p.result.non2xx,
            latency_ms_integer_histogram: { p50: p.result.latency.p50, p99: p.result.latency.p99, max: p.result.latency.max },
          },
          orchestratord_cpu_s: orchCpu,
          // Near 1.0: orchestratord's one event loop is the bottleneck; well below: the client (or the machine) is.
          orchestratord_cores_used: orchCpu / p.result.duration,
          orchestratord_cpu_us_per_task: (orchCpu * 1e6) / p.admitted,
          canceled: p.canceled,
          max_cancel_backlog: p.maxBacklog,
          other_status: p.otherStatus,
          other_status_bodies: p.sampleBodies,
        },
      };
    } finally {
      await fixture.stop();
      await orch.stop();
    }
  },
};
