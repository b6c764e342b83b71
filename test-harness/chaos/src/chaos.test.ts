import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ChaosCluster } from './chaos-cluster.js';
import { runChaos, type ChaosReport } from './chaos-run.js';
import { writeReport } from './report.js';

const HEARTBEAT_MS = 300;
// Printed at the start and again on any failure: CHAOS_SEED=<seed> replays the run's random choices.
const SEED = Number(process.env.CHAOS_SEED ?? Date.now() % 1_000_000);

describe('chaos run: real cluster under load with engine kill, node stop and orchestratord restart', () => {
  let cluster: ChaosCluster;
  let report: ChaosReport;
  let reportPath: string;

  beforeAll(async () => {
    process.stdout.write(`[chaos] seed ${SEED}\n`);
    cluster = await ChaosCluster.start({ nodes: 2, slots: 4, heartbeatMs: HEARTBEAT_MS, ctx: 2048, threads: 1 });
    try {
      report = await runChaos(cluster, {
        targetAdmitted: 520,
        maxSubmitted: 900,
        concurrency: 14,
        maxTokens: { min: 4, max: 48 },
        cancelRate: 0.15,
        disconnectRate: 0.1,
        taskTimeoutMs: 60_000,
        heartbeatMs: HEARTBEAT_MS,
        seed: SEED,
        model: 'synthetic:llama',
        log: (m) => process.stdout.write(`[chaos] ${m}\n`),
      });
    } catch (err) {
      process.stdout.write(`[chaos] run failed: replay with CHAOS_SEED=${SEED}\n`);
      throw err;
    }
    reportPath = await writeReport(report);
    process.stdout.write(
      `[chaos] report ${reportPath}\n[chaos] counts ${JSON.stringify(report.counts)}\n[chaos] rss ${JSON.stringify(report.rss)}\n`,
    );
  });

  beforeEach(({ task, onTestFailed }) => {
    onTestFailed(() => {
      process.stdout.write(`[chaos] FAILED "${task.name}": replay with CHAOS_SEED=${SEED}\n`);
    });
  });

  afterAll(async () => {
    await cluster?.close();
  });

  it('admitted at least 500 tasks, with cancels, disconnects and all three faults', () => {
    expect(report.counts.tasks_admitted).toBeGreaterThanOrEqual(500);
    expect(report.counts.cancels_sent).toBeGreaterThan(0);
    expect(report.counts.disconnects).toBeGreaterThan(0);
    expect(report.faults.map((f) => f.kind)).toEqual(['kill_engine', 'sigstop_node', 'restart_orchestrator']);
    expect(report.fault_problems).toEqual([]);
  });

  it('every admitted task ended with exactly one terminal event (or, across the restart, a 404 / connection error), none hung', () => {
    expect(report.violations).toEqual([]);
    expect(report.counts.outcomes.hung ?? 0).toBe(0);
    expect(report.counts.outcomes.no_terminal ?? 0).toBe(0);
    const lost = report.counts.outcomes.lost_to_restart ?? 0;
    expect(report.counts.terminal_events + lost).toBe(report.counts.tasks_admitted);
  });

  it('canceled and disconnected tasks end with end {canceled: true}', () => {
    expect((report.counts.outcomes.canceled ?? 0) + (report.counts.outcomes.disconnected ?? 0)).toBeGreaterThan(0);
    expect(report.counts.terminal_by_kind.end_canceled ?? 0).toBeGreaterThan(0);
  });

  it('leaves no leaks: slots free everywhere, no orphan llama-server, clean exits, token never logged', () => {
    expect(report.leaks).toEqual([]);
    expect(report.end_state.engine_pids_seen.length).toBeGreaterThanOrEqual(3);
  });

  it('keeps orchestratord and pool-managerd RSS within max(2x, +100 MiB) of the start of the load', () => {
    expect(report.rss.length).toBeGreaterThanOrEqual(4);
    for (const s of report.rss) expect(s, s.process).toMatchObject({ within_bound: true });
  });
});
