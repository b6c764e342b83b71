import { ensureDebianPackage } from '@llama-orch/daemon-support/debian-package';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { HAPROXY } from './balancer.js';
import { REDIS_SERVER } from './redis-daemon.js';
import { ReplicaCluster } from './replica-cluster.js';
import { runReplicaChaos, type ReplicaChaosReport } from './replica-chaos-run.js';
import { writeReport } from './report.js';

const HEARTBEAT_MS = 500;
// The issue's bound is 2,000; CHAOS_REPLICAS_TASKS runs a shorter (or longer) load with the same faults.
const TASKS = Number(process.env.CHAOS_REPLICAS_TASKS ?? 2000);
// The Redis SIGKILL (AOF kept, 1.5 s down) is in the default run; CHAOS_REDIS_KILL=0 leaves it out.
const REDIS_KILL = process.env.CHAOS_REDIS_KILL !== '0';
// Printed at the start and again on any failure: CHAOS_SEED=<seed> replays the run's random choices.
const SEED = Number(process.env.CHAOS_SEED ?? Date.now() % 1_000_000);
describe('chaos run with 3 replicas on Redis: replica SIGKILLs, engine kill, node stop and a Redis SIGKILL', () => {
  let cluster: ReplicaCluster;
  let report: ReplicaChaosReport;

  beforeAll(async () => {
    // Debian's redis-server and HAProxy, installed when missing, as the other replica suites do
    await ensureDebianPackage({ pkg: 'redis-server', path: REDIS_SERVER, who: 'chaos-replicas' });
    await ensureDebianPackage({ pkg: 'haproxy', path: HAPROXY, who: 'chaos-replicas' });
    process.stdout.write(`[chaos-replicas] seed ${SEED}\n`);
    cluster = await ReplicaCluster.start({
      replicas: 3,
      nodes: 2,
      slots: 4,
      heartbeatMs: HEARTBEAT_MS,
      ctx: 2048,
      threads: 1,
    });
    try {
      report = await runReplicaChaos(cluster, {
        targetAdmitted: TASKS,
        maxSubmitted: Math.ceil(TASKS * 1.5),
        concurrency: 16,
        maxTokens: { min: 2, max: 8 },
        cancelRate: 0.08,
        disconnectRate: 0.05,
        taskTimeoutMs: 60_000,
        heartbeatMs: HEARTBEAT_MS,
        redisDownMs: REDIS_KILL ? 1500 : undefined,
        reconnectMs: 100,
        seed: SEED,
        model: 'synthetic:llama',
        log: (m) => process.stdout.write(`[chaos-replicas] ${m}\n`),
      });
    } catch (err) {
      process.stdout.write(`[chaos-replicas] run failed: replay with CHAOS_SEED=${SEED}\n`);
      throw err;
    }
    const path = await writeReport(report, 'replicas');
    const c = report.counts;
    process.stdout.write(
      `[chaos-replicas] report ${path}\n[chaos-replicas] summary: ${c.tasks_admitted} admitted of ${c.tasks_submitted} in ${report.wall_ms} ms, ` +
        `${c.terminal_events} ended once, ${c.tasks_reconnected} reconnected, ${c.records_checked} records re-read (${c.records_gone_with_owner} gone with their owner), refused ${JSON.stringify(c.rejected_by_code)}, ` +
        `faults ${report.faults.map((f) => `${f.kind}:${f.recoveredMs ?? 'not recovered'}ms`).join(' ')}, violations ${report.violations.length}, leaks ${c.leaks_found}\n` +
        `[chaos-replicas] counts ${JSON.stringify(c)}\n`,
    );
  });

  beforeEach(({ task, onTestFailed }) => {
    onTestFailed(() => {
      process.stdout.write(`[chaos-replicas] FAILED "${task.name}": replay with CHAOS_SEED=${SEED}\n`);
    });
  });

  afterAll(async () => {
    await cluster?.close();
  });

  it('admitted the target (2,000) through every fault; refusals typed', () => {
    expect(report.counts.tasks_admitted).toBeGreaterThanOrEqual(TASKS);
    expect(report.faults.map((f) => f.kind)).toEqual([
      'kill_engine',
      'kill_replica',
      'sigstop_node',
      ...(REDIS_KILL ? ['kill_redis'] : []),
      'kill_replica',
    ]);
    expect(report.fault_problems).toEqual([]);
    // refusals are typed envelopes (checked per rejection), and only the expected codes
    for (const code of Object.keys(report.counts.rejected_by_code))
      expect([
        'STORE_UNAVAILABLE',
        'QUEUE_FULL_DROP_LRU',
        'ADMISSION_REJECT',
        'MODEL_NOT_AVAILABLE',
        'POOL_UNREADY',
        'POOL_UNAVAILABLE',
        'REPLICA_EXHAUSTED',
      ]).toContain(code);
  });

  it('every admitted task ended exactly once, token indices contiguous across reconnects, the shared record agrees', () => {
    expect(report.violations).toEqual([]);
    expect(report.counts.terminal_events).toBe(report.counts.tasks_admitted);
    expect(report.counts.records_checked + report.counts.records_gone_with_owner).toBe(report.counts.tasks_admitted);
    // A record outlives its task by the stream grace (60 s), longer than the run (~40 s for 2,000
    // tasks): a record gone with its owner is the exception, at most a tenth of the tasks (0 seen).
    expect(report.counts.records_gone_with_owner).toBeLessThanOrEqual(Math.floor(report.counts.tasks_admitted / 10));
    expect(report.counts.tasks_reconnected).toBeGreaterThan(0);
  });

  it('leaves no leaks: slots free on every engine and node, no orphan llama-server, clean exits, token never logged', () => {
    expect(report.leaks).toEqual([]);
    expect(report.end_state.engine_pids_seen.length).toBeGreaterThanOrEqual(3);
  });
});
