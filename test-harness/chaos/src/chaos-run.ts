import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { Agent, request } from 'undici';
import type { ChaosCluster } from './chaos-cluster.js';
import { killEngine, restartOrchestrator, stopNode, type FaultRecord } from './fault-injector.js';
import { checkAfterStop, checkNodesIdle, getJson, settle, watchEngines } from './end-state.js';
import { rssBytes } from './proc.js';
import { mulberry32 } from './random.js';
import { runTask, type TaskPlan, type TaskTrace } from './task-client.js';
import { judgeTask, type RestartWindow, type TaskOutcome } from './task-invariants.js';

export interface ChaosRunOptions {
  /** Stop submitting once this many tasks were admitted (≥ 500 for the suite). */
  targetAdmitted: number;
  /** Hard cap on submissions (rejections during the restart count too). */
  maxSubmitted: number;
  /** Clients in flight at once. */
  concurrency: number;
  maxTokens: { min: number; max: number };
  /** Share of tasks canceled with POST …/cancel. */
  cancelRate: number;
  /** Share of tasks whose client drops the SSE connection. */
  disconnectRate: number;
  /** Client-side bound per task; a task past it is a hang (failure). */
  taskTimeoutMs: number;
  /** Node heartbeat interval the cluster runs with, ms. */
  heartbeatMs: number;
  seed: number;
  model: string;
  /** Progress lines (the test prints them). */
  log: (msg: string) => void;
}

export interface RssSample {
  process: string;
  pid: number;
  start_bytes: number | undefined;
  end_bytes: number | undefined;
  /** end ≤ max(2 × start, start + 100 MiB). */
  within_bound: boolean;
}

/** What the chaos run writes to `reports/<timestamp>.json`. */
export interface ChaosReport {
  started_at: string;
  wall_ms: number;
  seed: number;
  options: Omit<ChaosRunOptions, 'log'>;
  counts: {
    tasks_submitted: number;
    tasks_admitted: number;
    rejected_by_code: Record<string, number>;
    post_connection_errors: number;
    cancels_sent: number;
    disconnects: number;
    faults_injected: number;
    terminal_events: number;
    terminal_by_kind: Record<string, number>;
    outcomes: Partial<Record<TaskOutcome, number>>;
    /** How tasks of the restarted orchestratord ended on the client side. */
    lost_to_restart_by_kind: Record<string, number>;
    leaks_found: number;
  };
  faults: FaultRecord[];
  rss: RssSample[];
  end_state: {
    orchestrator_pools: unknown;
    node_pools: unknown;
    engine_slots: Record<string, unknown>;
    daemon_exits: unknown;
    /** Last lines of any daemon that did not exit 0. */
    exit_tails: Record<string, string[]>;
    engine_pids_seen: number[];
    engine_pids_alive_after_shutdown: number[];
    orphan_engines: unknown[];
    token_leak_lines: number;
  };
  leaks: string[];
  violations: Array<{ task: number; task_id: string; outcome: TaskOutcome; problems: string[] }>;
  fault_problems: string[];
}

export function planTask(
  index: number,
  rnd: () => number,
  opts: Pick<ChaosRunOptions, 'cancelRate' | 'disconnectRate' | 'maxTokens'>,
  pools: readonly string[],
): TaskPlan {
  const r = rnd();
  const action: TaskPlan['action'] =
    r < opts.cancelRate ? 'cancel' : r < opts.cancelRate + opts.disconnectRate ? 'disconnect' : 'none';
  // Tasks that will be canceled get the upper third of the range, so most cancels land mid-stream
  // instead of racing a natural end.
  const min =
    action === 'none' ? opts.maxTokens.min : Math.max(opts.maxTokens.min, Math.floor((2 * opts.maxTokens.max) / 3));
  const maxTokens = min + Math.floor(rnd() * (opts.maxTokens.max - min + 1));
  const p = rnd();
  const pool = pools[Math.floor(rnd() * pools.length)] as string;
  return {
    index,
    taskId: randomUUID(),
    sessionId: randomUUID(),
    priority: rnd() < 0.5 ? 'interactive' : 'batch',
    maxTokens,
    seed: Math.floor(rnd() * 1_000_000),
    placement: p < 0.8 ? { mode: 'auto' } : { mode: p < 0.9 ? 'prefer' : 'pin', pool },
    action,
    actAfterTokens: Math.floor(rnd() * Math.min(maxTokens, 8)),
  };
}

export function bump(map: Record<string, number>, key: string): void {
  map[key] = (map[key] ?? 0) + 1;
}

function rssBound(start: number | undefined, end: number | undefined): boolean {
  if (start === undefined || end === undefined) return false;
  return end <= Math.max(2 * start, start + 100 * 1024 * 1024);
}

/**
 * The chaos run: a bounded stream of random tasks (priorities, placements, cancels, disconnects)
 * against the cluster while three faults are injected at fixed points of the load — kill -9 of a
 * llama-server (20 % admitted), SIGSTOP of a pool-managerd past the node timeout (40 %), and an
 * orchestratord restart (65 %) — then the invariants are checked and the cluster is shut down.
 */
export async function runChaos(cluster: ChaosCluster, opts: ChaosRunOptions): Promise<ChaosReport> {
  const startedAt = Date.now();
  const rnd = mulberry32(opts.seed);
  const pools = cluster.nodes.map((n) => n.poolId);
  const dispatcher = new Agent({ connections: 256, pipelining: 0, keepAliveTimeout: 4000 });
  const traces: TaskTrace[] = [];
  const restarts: RestartWindow[] = [];
  const faults: FaultRecord[] = [];
  const faultErrors: string[] = [];
  let admitted = 0;
  let submitted = 0;
  let loadDone = false;

  const engines = await watchEngines(cluster);

  const rss = new Map<string, { pid: number; start?: number; end?: number }>();
  const sampleStart = (): void => {
    rss.set(`orchestratord#${cluster.orchestrators.length - 1}`, {
      pid: cluster.orchestrator.pid,
      start: rssBytes(cluster.orchestrator.pid),
    });
    for (const n of cluster.nodes)
      rss.set(`pool-managerd:${n.id}`, { pid: n.daemon.pid, start: rssBytes(n.daemon.pid) });
  };
  const sampleEnd = (name: string, pid: number): void => {
    const s = rss.get(name);
    if (s !== undefined && s.pid === pid) s.end = rssBytes(pid);
  };

  const admittedAt = (fraction: number) => async (): Promise<boolean> => {
    while (admitted < opts.targetAdmitted * fraction) {
      if (loadDone) return false;
      await sleep(20);
    }
    return true;
  };
  const faultTrack = (async () => {
    if (!(await admittedAt(0.05)())) return;
    sampleStart();
    const [first, second] = cluster.nodes;
    if (first === undefined || second === undefined) throw new Error('the chaos run needs two nodes');
    if (!(await admittedAt(0.2)())) return;
    opts.log(`fault: kill -9 llama-server of ${first.id} (admitted ${admitted})`);
    faults.push(await killEngine(cluster, first));
    if (!(await admittedAt(0.4)())) return;
    opts.log(`fault: SIGSTOP ${second.id} (admitted ${admitted})`);
    faults.push(await stopNode(cluster, second, opts.heartbeatMs));
    if (!(await admittedAt(0.65)())) return;
    opts.log(`fault: restart orchestratord (admitted ${admitted})`);
    const oldName = `orchestratord#${cluster.orchestrators.length - 1}`;
    const oldPid = cluster.orchestrator.pid;
    sampleEnd(oldName, oldPid);
    const window: RestartWindow = { begunAt: Date.now(), listeningAt: Number.POSITIVE_INFINITY };
    restarts.push(window);
    faults.push(await restartOrchestrator(cluster, window));
    rss.set(`orchestratord#${cluster.orchestrators.length - 1}`, {
      pid: cluster.orchestrator.pid,
      start: rssBytes(cluster.orchestrator.pid),
    });
  })().catch((err: unknown) => {
    faultErrors.push(`fault track crashed: ${(err as Error).stack ?? String(err)}`);
  });

  const ctx = {
    baseUrl: () => cluster.url,
    auth: cluster.auth,
    dispatcher,
    model: opts.model,
    timeoutMs: opts.taskTimeoutMs,
    onAdmitted: () => {
      admitted += 1;
      if (admitted % 100 === 0) opts.log(`admitted ${admitted} (submitted ${submitted})`);
    },
  };
  const worker = async (): Promise<void> => {
    while (admitted < opts.targetAdmitted && submitted < opts.maxSubmitted) {
      const plan = planTask(submitted++, rnd, opts, pools);
      const trace = await runTask(plan, ctx);
      traces.push(trace);
      // Refused or unreachable (orchestratord restarting, nodes not re-registered): back off a little.
      if (!trace.admitted) await sleep(trace.admission.error !== undefined ? 400 : 150);
    }
  };
  await Promise.all(Array.from({ length: opts.concurrency }, () => worker()));
  loadDone = true;
  await faultTrack;
  opts.log(`load done: submitted ${submitted}, admitted ${admitted}; checking end state`);

  const leaks: string[] = [];
  // Quiescence: every slot free again, seen from orchestratord, the nodes and the engines.
  const orchPools = await settle(async () => {
    const { body } = await getJson(new URL('/v2/pools', cluster.url), cluster.auth);
    const list = (
      body as {
        pools: Array<{
          pool_id: string;
          ready: boolean;
          node_state: string;
          slots_free: number;
          slots_total: number;
          leased: number;
        }>;
      }
    ).pools;
    const ok = pools.every((id) =>
      list.some(
        (p) =>
          p.pool_id === id && p.ready && p.node_state === 'online' && p.leased === 0 && p.slots_free === p.slots_total,
      ),
    );
    return { ok, value: list };
  }, 30_000);
  if (!orchPools.ok) leaks.push(`orchestratord pools not all free/ready: ${JSON.stringify(orchPools.value)}`);
  const { nodePools, engineSlots } = await checkNodesIdle(cluster, leaks);
  const metrics = await request(new URL('/metrics', cluster.url)).then(
    async (r) => {
      await r.body.text();
      return r.statusCode;
    },
    () => 0,
  );
  if (metrics !== 200) leaks.push(`orchestratord /metrics answered ${metrics} after the run`);
  sampleEnd(`orchestratord#${cluster.orchestrators.length - 1}`, cluster.orchestrator.pid);
  for (const n of cluster.nodes) sampleEnd(`pool-managerd:${n.id}`, n.daemon.pid);

  await engines.stop();
  await dispatcher.close();
  const exits = await cluster.stop();
  const daemonExits = [...cluster.nodes.map((n) => n.id), 'orchestratord'].map((name, i) => ({ name, ...exits[i] }));
  const exitTails: Record<string, string[]> = {};
  daemonExits.forEach((e, i) => {
    if (e.code === 0) return;
    leaks.push(`${e.name} exited with ${e.code ?? e.signal} on SIGTERM`);
    const d = i < cluster.nodes.length ? cluster.nodes[i]?.daemon : cluster.orchestrator;
    exitTails[e.name] = (d?.lines ?? []).slice(-25).map((l) => l.text.slice(0, 600));
  });
  const { stillAlive, orphans, tokenLeaks } = await checkAfterStop(cluster, engines.pids, leaks);

  const rssSamples: RssSample[] = [...rss.entries()].map(([name, s]) => ({
    process: name,
    pid: s.pid,
    start_bytes: s.start,
    end_bytes: s.end,
    within_bound: rssBound(s.start, s.end),
  }));

  const outcomes: Partial<Record<TaskOutcome, number>> = {};
  const terminalByKind: Record<string, number> = {};
  const rejected: Record<string, number> = {};
  const lostByKind: Record<string, number> = {};
  const violations: ChaosReport['violations'] = [];
  let terminals = 0;
  for (const t of traces) {
    if (!t.admitted) {
      if (t.admission.status !== undefined) bump(rejected, t.admission.code ?? String(t.admission.status));
      if (t.admission.problems.length > 0)
        violations.push({
          task: t.plan.index,
          task_id: t.plan.taskId,
          outcome: 'no_terminal',
          problems: t.admission.problems.map((p) => `rejection: ${p}`),
        });
      continue;
    }
    const v = judgeTask(t, restarts);
    outcomes[v.outcome] = (outcomes[v.outcome] ?? 0) + 1;
    if (v.outcome === 'lost_to_restart') bump(lostByKind, v.detail ?? 'unknown');
    if (v.terminal !== undefined) {
      terminals += 1;
      bump(
        terminalByKind,
        v.terminal.event === 'end'
          ? v.terminal.data.canceled === true
            ? 'end_canceled'
            : 'end'
          : `error:${String(v.terminal.data.code)}`,
      );
    }
    if (v.problems.length > 0)
      violations.push({ task: t.plan.index, task_id: t.plan.taskId, outcome: v.outcome, problems: v.problems });
  }
  const faultProblems = [...faultErrors, ...faults.flatMap((f) => f.problems.map((p) => `${f.kind}: ${p}`))];
  return {
    started_at: new Date(startedAt).toISOString(),
    wall_ms: Date.now() - startedAt,
    seed: opts.seed,
    options: { ...opts, log: undefined } as Omit<ChaosRunOptions, 'log'>,
    counts: {
      tasks_submitted: traces.length,
      tasks_admitted: traces.filter((t) => t.admitted).length,
      rejected_by_code: rejected,
      post_connection_errors: traces.filter((t) => t.admission.error !== undefined).length,
      cancels_sent: traces.filter((t) => t.cancel !== undefined).length,
      disconnects: traces.filter((t) => t.disconnectedAt !== undefined).length,
      faults_injected: faults.length,
      terminal_events: terminals,
      terminal_by_kind: terminalByKind,
      outcomes,
      lost_to_restart_by_kind: lostByKind,
      leaks_found: leaks.length,
    },
    faults,
    rss: rssSamples,
    end_state: {
      orchestrator_pools: orchPools.value,
      node_pools: nodePools,
      engine_slots: engineSlots,
      daemon_exits: daemonExits,
      exit_tails: exitTails,
      engine_pids_seen: [...engines.pids].sort((a, b) => a - b),
      engine_pids_alive_after_shutdown: stillAlive,
      orphan_engines: orphans,
      token_leak_lines: tokenLeaks,
    },
    leaks,
    violations,
    fault_problems: faultProblems,
  };
}

export { getJson, settle } from './end-state.js';
