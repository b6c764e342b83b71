import { setTimeout as sleep } from 'node:timers/promises';
import { BenchError } from '../errors.js';
import { admissionPhase } from '../lib/admission-load.js';
import { newToken, startOrchestratord, waitPoolsReady } from '../lib/cluster.js';
import { profFlags, type Bench, type BenchContext } from '../lib/context.js';
import { cpuSeconds } from '../lib/proc.js';
import { startFixtureNode } from '../lib/fixture.js';
import type { BenchOutcome } from '../lib/result.js';
import { rounded, summarize } from '../lib/stats.js';

const MODEL = 'fixture:busy';

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
      ctx.log(
        `admission: warm-up 3 s, then ${seconds} s of autocannon (${connections} connections, each admitting then cancelling)`,
      );
      await admissionPhase(orch.url, token, MODEL, 3, connections);
      await sleep(500);
      const cpu0 = cpuSeconds(orch.pid);
      const p = await admissionPhase(orch.url, token, MODEL, seconds, connections);
      const orchCpu = cpuSeconds(orch.pid) - cpu0;
      if (p.admitted === 0)
        throw new BenchError(
          `no task admitted: ${JSON.stringify(p.otherStatus)} errors ${p.result.errors}: ${p.sampleBodies.join(' | ')}`,
        );
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
            latency_ms_integer_histogram: {
              p50: p.result.latency.p50,
              p99: p.result.latency.p99,
              max: p.result.latency.max,
            },
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
