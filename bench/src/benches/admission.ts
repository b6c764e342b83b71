import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import autocannon, { type AutocannonResult } from 'autocannon';
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
  otherStatus: Record<string, number>;
  sampleBodies: string[];
}

function taskBody(): string {
  return JSON.stringify({
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
}

/**
 * One autocannon phase. Every connection loops over two requests: POST /v2/tasks with a fresh
 * task, then POST /v2/tasks/{id}/cancel for the task it just admitted, so at most `connections`
 * tasks are ever queued. Only the 202s count as admissions and only their latencies are kept.
 */
/**
 * Request bodies made before the run: on a 2-core machine the load generator shares the CPU with
 * orchestratord, so it should spend as little as it can per request (each body is still a fresh
 * task_id/session_id, used once).
 */
function bodies(n: number): () => string {
  let pool = Array.from({ length: n }, taskBody);
  let next = 0;
  return () => {
    // A used-up batch is replaced by fresh bodies: a task id is never sent twice.
    if (next === pool.length) {
      pool = Array.from({ length: n }, taskBody);
      next = 0;
    }
    return pool[next++] as string;
  };
}

/** The task id of a 202 body without parsing the whole document. */
function taskIdOf(text: string): string | undefined {
  const at = text.indexOf('"task_id":"');
  if (at < 0) return undefined;
  const start = at + 11;
  const end = text.indexOf('"', start);
  return end < 0 ? undefined : text.slice(start, end);
}

async function phase(orchUrl: string, token: string, seconds: number, connections: number): Promise<PhaseResult> {
  let admitted = 0;
  let canceled = 0;
  const otherStatus: Record<string, number> = {};
  const sampleBodies: string[] = [];
  const latencies: number[] = [];
  const auth = `Bearer ${token}`;
  const nextBody = bodies(seconds * 12_000);
  const instance = autocannon({
    url: orchUrl,
    connections,
    pipelining: 1,
    duration: seconds,
    requests: [
      {
        method: 'POST',
        path: '/v2/tasks',
        headers: { 'content-type': 'application/json', authorization: auth },
        setupRequest: (req) => ({ ...req, body: nextBody() }),
        onResponse: (status, text, context) => {
          if (status === 202) {
            admitted += 1;
            context.taskId = taskIdOf(text);
          } else {
            context.taskId = undefined;
            otherStatus[status] = (otherStatus[status] ?? 0) + 1;
            if (sampleBodies.length < 3) sampleBodies.push(`${status} ${text.slice(0, 300)}`);
          }
        },
      },
      {
        method: 'POST',
        headers: { authorization: auth },
        // No admitted task (refused): start the loop again with a new admission.
        setupRequest: (req, context) => (typeof context.taskId === 'string' ? { ...req, path: `/v2/tasks/${context.taskId}/cancel` } : undefined),
        onResponse: (status) => {
          if (status === 204) canceled += 1;
          else otherStatus[`cancel ${status}`] = (otherStatus[`cancel ${status}`] ?? 0) + 1;
        },
      },
    ],
  });
  instance.on('response', (_client: unknown, status: number, _bytes: number, ms: number) => {
    if (status === 202) latencies.push(ms);
  });
  const result = await instance;
  return { result, latencies, admitted, canceled, otherStatus, sampleBodies };
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
      paths: ctx.paths,
      dir,
      token,
      heartbeatMs: 1000,
      nodeFlags: profFlags(ctx, 'admission-orchestratord'),
    });
    const fixture = await startFixtureNode(ctx.paths, dir, {
      orchestratorUrl: orch.url,
      token,
      nodes: 1,
      slotsPerPool: 1,
      model: MODEL,
      mode: 'busy',
      tokenIntervalMs: 1000,
      heartbeatMs: 1000,
      idPrefix: 'busy',
    });
    try {
      await waitPoolsReady(orch.url, token, ['busy-0'], [orch, fixture], 30_000);
      const connections = 10;
      const seconds = ctx.quick ? 3 : 10;
      ctx.log(`admission: warm-up 3 s, then ${seconds} s of autocannon (${connections} connections, each admitting then cancelling)`);
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
          `autocannon (${connections} connections, no pipelining, ${seconds} s after a 3 s warm-up); each connection loops ` +
          `POST /v2/tasks (fresh task_id/session_id, model '${MODEL}'; bodies made before the run, the 202\'s task_id read ` +
          'without parsing the whole body, so the load generator takes little of the shared CPU) then POST /v2/tasks/{id}/cancel for the task it ' +
          'was just given. The model is served by one FIXTURE node whose pool is ready with 0 free slots, so every task ' +
          'is admitted (202) and waits in the queue until its cancel (204) removes it: orchestratord serves one cancel ' +
          `per admission and never holds more than ${connections} queued tasks. orchestratord logs at info (its default) ` +
          'to a file. Tasks/s = 202s ÷ duration; latency = response time of each 202 (send → full response) as ' +
          'autocannon records it.',
        samples: { admissions: p.admitted, seconds },
        figures: {
          tasks_per_s: { label: 'tasks admitted per second', value: tasksPerS, unit: 'tasks/s' },
          latency_p50: { label: 'admission latency p50', value: lat.p50, unit: 'ms' },
          latency_p99: { label: 'admission latency p99', value: lat.p99, unit: 'ms' },
        },
        details: {
          latency_ms: rounded(lat),
          autocannon: {
            requests_per_s: p.result.requests.average,
            errors: p.result.errors,
            timeouts: p.result.timeouts,
            non2xx: p.result.non2xx,
            latency_ms_integer_histogram: { p50: p.result.latency.p50, p99: p.result.latency.p99, max: p.result.latency.max },
          },
          orchestratord_cpu_s: orchCpu,
          // Near 1.0: orchestratord's one event loop is the bottleneck; well below: the client (or the machine) is.
          orchestratord_cores_used: orchCpu / p.result.duration,
          orchestratord_cpu_us_per_task: (orchCpu * 1e6) / p.admitted,
          canceled: p.canceled,
          other_status: p.otherStatus,
          other_status_bodies: p.sampleBodies,
        },
        notes: [
          'Before this design the cancels came from a separate loop; it fell behind, the queue reached 3,707 tasks and ' +
            'every admission then paid for a dispatcher pass over the whole queue: 517 tasks/s, p99 52.8 ms (18:41 run).',
        ],
      };
    } finally {
      await fixture.stop();
      await orch.stop();
    }
  },
};
