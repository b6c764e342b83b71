import { setTimeout as sleep } from 'node:timers/promises';
import { Agent, request } from 'undici';
import { bump, planTask, type ChaosRunOptions } from './chaos-run.js';
import { checkAfterStop, checkNodesIdle, getJson, settle, watchEngines } from './end-state.js';
import { killEngine, stopNode, type FaultRecord } from './fault-injector.js';
import { mulberry32 } from './random.js';
import type { ReplicaCluster, ReplicaSlot } from './replica-cluster.js';
import { killRedis, killReplica } from './replica-faults.js';
import { runTask, type Frame, type TaskTrace } from './task-client.js';
import { judgeTask, type TaskOutcome } from './task-invariants.js';

export interface ReplicaChaosOptions extends Omit<ChaosRunOptions, 'maxSubmitted'> {
  maxSubmitted: number;
  /**
   * SIGKILL of redis-server (restarted with its AOF after this many ms) at 55 % admitted; undefined:
   * no Redis fault.
   */
  redisDownMs: number | undefined;
  /** EventSource-like reconnect delay of the /v2 clients, ms. */
  reconnectMs: number;
}

/** What `reports/<timestamp>-replicas.json` holds. */
export interface ReplicaChaosReport {
  started_at: string;
  wall_ms: number;
  seed: number;
  options: Omit<ReplicaChaosOptions, 'log'>;
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
    /** Tasks whose stream broke and was reopened with Last-Event-ID (at least once). */
    tasks_reconnected: number;
    /** POSTs HAProxy retried after the admitting replica died: 400 'already exists' for our own id, then followed. */
    admitted_by_balancer_retry: number;
    reconnects_by_cause: Record<string, number>;
    /** Ended tasks whose terminal frame was read again from another replica and matched. */
    records_checked: number;
    /** Tasks that ended before the last replica kill whose record answered 404 when read after the load: past its retention (not a violation). */
    records_gone_with_owner: number;
    leaks_found: number;
  };
  faults: FaultRecord[];
  end_state: {
    pools: unknown;
    node_pools: Record<string, unknown>;
    engine_slots: Record<string, unknown>;
    daemon_exits: unknown;
    exit_tails: Record<string, string[]>;
    engine_pids_seen: number[];
    orphan_engines: unknown[];
    token_leak_lines: number;
  };
  leaks: string[];
  violations: Array<{ task: number; task_id: string; outcome: TaskOutcome | 'record'; problems: string[] }>;
  /** The daemons' lines naming a violating task (the first 10 tasks, 40 lines each) and the replicas' warnings (`*`): the evidence to start from. */
  violation_logs: Record<string, string[]>;
  fault_problems: string[];
}

const sameTerminal = (a: Frame, b: Frame): boolean =>
  a.event === b.event &&
  a.data.code === b.data.code &&
  a.data.stop_type === b.data.stop_type &&
  a.data.canceled === b.data.canceled;

/**
 * The replicas' chaos run: random /v2 tasks through the balancer, clients that reconnect with
 * Last-Event-ID when a stream breaks, and five faults at fixed shares of the admitted tasks —
 * llama-server kill -9 (10 %), SIGKILL of replica r1 (25 %), SIGSTOP of node 2 (40 %), optionally
 * SIGKILL of redis-server restarted with its AOF (55 %), SIGKILL of replica r2 (75 %). Then: every admitted
 * task ended exactly once (one terminal frame, token indices contiguous across reconnects, the
 * same terminal frame read back from another replica), no slot held anywhere.
 */
export async function runReplicaChaos(cluster: ReplicaCluster, opts: ReplicaChaosOptions): Promise<ReplicaChaosReport> {
  const startedAt = Date.now();
  const rnd = mulberry32(opts.seed);
  const pools = cluster.nodes.map((n) => n.poolId);
  const dispatcher = new Agent({ connections: 256, pipelining: 0, keepAliveTimeout: 4000 });
  const traces: TaskTrace[] = [];
  const faults: FaultRecord[] = [];
  const faultErrors: string[] = [];
  let admitted = 0;
  let submitted = 0;
  let loadDone = false;
  const engines = await watchEngines(cluster);

  const at = async (fraction: number): Promise<boolean> => {
    while (admitted < opts.targetAdmitted * fraction) {
      if (loadDone) return false;
      await sleep(20);
    }
    return true;
  };
  const [node1, node2] = cluster.nodes;
  const [r1, r2] = cluster.replicas;
  if (node1 === undefined || node2 === undefined || r1 === undefined || r2 === undefined)
    throw new Error('the replica chaos run needs two nodes and two replicas');
  type Planned = [number, string, () => Promise<FaultRecord>];
  const plan: Planned[] = [
    [0.1, `kill -9 llama-server of ${node1.id}`, () => killEngine(cluster, node1)],
    [0.25, `SIGKILL replica ${r1.id}`, () => killReplica(cluster, r1 as ReplicaSlot)],
    [0.4, `SIGSTOP ${node2.id}`, () => stopNode(cluster, node2, opts.heartbeatMs)],
    ...(opts.redisDownMs === undefined
      ? []
      : [
          [
            0.55,
            `SIGKILL redis-server (${opts.redisDownMs} ms down, AOF kept)`,
            () => killRedis(cluster, opts.redisDownMs ?? 0),
          ] satisfies Planned,
        ]),
    [0.75, `SIGKILL replica ${r2.id}`, () => killReplica(cluster, r2 as ReplicaSlot)],
  ];
  const faultTrack = (async () => {
    for (const [fraction, what, inject] of plan) {
      if (!(await at(fraction))) return;
      opts.log(`fault: ${what} (admitted ${admitted})`);
      const rec = await inject();
      faults.push(rec);
      opts.log(
        `fault done: ${rec.kind} recovered in ${rec.recoveredMs ?? '—'} ms ${JSON.stringify(rec.details)}${rec.problems.length > 0 ? ` problems: ${rec.problems.join('; ')}` : ''}`,
      );
    }
  })().catch((err: unknown) => faultErrors.push(`fault track crashed: ${(err as Error).stack ?? String(err)}`));

  const ctx = {
    baseUrl: () => cluster.url,
    auth: cluster.auth,
    dispatcher,
    model: opts.model,
    timeoutMs: opts.taskTimeoutMs,
    reconnectMs: opts.reconnectMs,
    onAdmitted: () => {
      admitted += 1;
      if (admitted % 250 === 0) opts.log(`admitted ${admitted} (submitted ${submitted})`);
    },
  };
  // A task that hung is a violation already: the load stops there (every client would wait out its timeout from then on).
  let hungSeen = false;
  const worker = async (): Promise<void> => {
    while (admitted < opts.targetAdmitted && submitted < opts.maxSubmitted && !hungSeen) {
      const trace = await runTask(planTask(submitted++, rnd, opts, pools), ctx);
      traces.push(trace);
      if (trace.hung && !hungSeen) {
        hungSeen = true;
        opts.log(`task ${trace.plan.index} (${trace.plan.taskId}) hung: the load stops`);
      }
      // Refused (Redis down: 503 STORE_UNAVAILABLE; queue full) or unreachable: retry later.
      if (!trace.admitted) await sleep(trace.admission.error !== undefined ? 400 : 150);
    }
  };
  // a stalled load shows in these lines (admissions stop while submissions go on, or nothing moves)
  const progress = setInterval(() => {
    const refused: Record<string, number> = {};
    for (const t of traces)
      if (!t.admitted) bump(refused, t.admission.code ?? t.admission.error ?? String(t.admission.status));
    opts.log(
      `progress: submitted ${submitted}, admitted ${admitted}, finished ${traces.length}, refused ${JSON.stringify(refused)}`,
    );
  }, 10_000);
  await Promise.all(Array.from({ length: opts.concurrency }, () => worker()));
  clearInterval(progress);
  loadDone = true;
  await faultTrack;
  opts.log(`load done: submitted ${submitted}, admitted ${admitted}; checking records and end state`);

  const violations: ReplicaChaosReport['violations'] = [];
  // The shared record: each ended task's terminal frame, read again from a replica chosen by its
  // index (resuming at the terminal frame's id gives that frame again), must be the one the client saw.
  let recordsChecked = 0;
  let recordsGoneWithOwner = 0;
  const lastKillAt = Math.max(
    0,
    ...faults.filter((f) => f.kind === 'kill_replica').map((f) => Date.parse(f.at) + (f.recoveredMs ?? 0)),
  );
  const ended = traces.filter((t) => t.admitted);
  let next = 0;
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      for (let k = next++; k < ended.length; k = next++) {
        const t = ended[k] as TaskTrace;
        const frames = [...t.frames, ...(t.resume?.frames ?? [])];
        const terminal = frames.find((f) => f.event === 'end' || f.event === 'error');
        if (terminal?.id === undefined) continue;
        const replica = cluster.replicas[t.plan.index % cluster.replicas.length] as ReplicaSlot;
        const problem = await readTerminal(
          `${cluster.replicaUrl(replica)}/v2/tasks/${t.plan.taskId}/events`,
          terminal.id,
          cluster.auth,
          dispatcher,
        ).then(
          (f) =>
            f === undefined
              ? `${replica.id}: no terminal frame after id ${terminal.id}`
              : sameTerminal(f, terminal)
                ? undefined
                : `${replica.id} says ${JSON.stringify(f)}, the client saw ${JSON.stringify(terminal)}`,
          (err: unknown) => `${replica.id}: ${(err as Error).message}`,
        );
        if (problem === undefined) recordsChecked += 1;
        // A record lives for the stream grace (60 s) after its task ended: an early task read after a
        // long load answers 404. A task that ended after the last replica kill must read.
        else if (terminal.at < lastKillAt && problem.includes('answered 404')) recordsGoneWithOwner += 1;
        else violations.push({ task: t.plan.index, task_id: t.plan.taskId, outcome: 'record', problems: [problem] });
      }
    }),
  );

  const leaks: string[] = [];
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
    return {
      ok: pools.every((id) =>
        list.some(
          (p) =>
            p.pool_id === id &&
            p.ready &&
            p.node_state === 'online' &&
            p.leased === 0 &&
            p.slots_free === p.slots_total,
        ),
      ),
      value: list,
    };
  }, 30_000);
  if (!orchPools.ok) leaks.push(`pools not all free/ready through the balancer: ${JSON.stringify(orchPools.value)}`);
  const { nodePools, engineSlots } = await checkNodesIdle(cluster, leaks);

  await engines.stop();
  await dispatcher.close();
  const exits = await cluster.stop();
  const exitTails: Record<string, string[]> = {};
  for (const e of exits) {
    if (e.code === 0) continue;
    leaks.push(`${e.name} exited with ${e.code ?? e.signal} on SIGTERM`);
    const d = [...cluster.nodes.map((n) => n.daemon), ...cluster.replicas.flatMap((r) => r.generations)].find(
      (x) => x.name === e.name || x.name === `pool-managerd:${e.name}`,
    );
    exitTails[e.name] = (d?.lines ?? []).slice(-25).map((l) => l.text.slice(0, 600));
  }
  const { orphans, tokenLeaks } = await checkAfterStop(cluster, engines.pids, leaks);

  const outcomes: Partial<Record<TaskOutcome, number>> = {};
  const terminalByKind: Record<string, number> = {};
  const rejected: Record<string, number> = {};
  const reconnectCauses: Record<string, number> = {};
  let terminals = 0;
  for (const t of traces) {
    for (const c of t.reconnects) bump(reconnectCauses, c);
    if (!t.admitted) {
      if (t.admission.status !== undefined) bump(rejected, t.admission.code ?? String(t.admission.status));
      if (t.admission.status === 400)
        violations.push({
          task: t.plan.index,
          task_id: t.plan.taskId,
          outcome: 'no_terminal',
          problems: [`valid task refused: ${t.admission.body ?? ''}`],
        });
      if (t.admission.problems.length > 0)
        violations.push({
          task: t.plan.index,
          task_id: t.plan.taskId,
          outcome: 'no_terminal',
          problems: t.admission.problems.map((p) => `rejection: ${p}`),
        });
      continue;
    }
    // no restart windows: with replicas nothing may be lost to a fault
    const v = judgeTask(t, []);
    bump(outcomes, v.outcome);
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
      violations.push({
        task: t.plan.index,
        task_id: t.plan.taskId,
        outcome: v.outcome,
        problems: [...v.problems, `reconnects: ${t.reconnects.join(',') || 'none'}`, `frames: ${frameLine(t)}`],
      });
  }
  return {
    started_at: new Date(startedAt).toISOString(),
    wall_ms: Date.now() - startedAt,
    seed: opts.seed,
    options: { ...opts, log: undefined } as Omit<ReplicaChaosOptions, 'log'>,
    counts: {
      tasks_submitted: traces.length,
      tasks_admitted: ended.length,
      rejected_by_code: rejected,
      post_connection_errors: traces.filter((t) => t.admission.error !== undefined).length,
      cancels_sent: traces.filter((t) => t.cancel !== undefined).length,
      disconnects: traces.filter((t) => t.disconnectedAt !== undefined).length,
      faults_injected: faults.length,
      terminal_events: terminals,
      terminal_by_kind: terminalByKind,
      outcomes,
      tasks_reconnected: traces.filter((t) => t.reconnects.length > 0).length,
      admitted_by_balancer_retry: traces.filter((t) => t.admission.duplicateOfRetry === true).length,
      reconnects_by_cause: reconnectCauses,
      records_checked: recordsChecked,
      records_gone_with_owner: recordsGoneWithOwner,
      leaks_found: leaks.length,
    },
    faults,
    end_state: {
      pools: orchPools.value,
      node_pools: nodePools,
      engine_slots: engineSlots,
      daemon_exits: exits,
      exit_tails: exitTails,
      engine_pids_seen: [...engines.pids].sort((a, b) => a - b),
      orphan_engines: orphans,
      token_leak_lines: tokenLeaks,
    },
    leaks,
    violations,
    violation_logs: linesNaming(
      cluster,
      violations.slice(0, 10).map((v) => v.task_id),
      traces.find((t) => t.hung)?.postedAt,
    ),
    fault_problems: [...faultErrors, ...faults.flatMap((f) => f.problems.map((p) => `${f.kind}: ${p}`))],
  };
}

/** Resumes a task's stream after `lastId` and returns its first terminal frame. */
async function readTerminal(
  url: string,
  lastId: string,
  auth: Record<string, string>,
  dispatcher: Agent,
): Promise<Frame | undefined> {
  const res = await request(url, {
    dispatcher,
    headers: { ...auth, accept: 'text/event-stream', 'last-event-id': lastId },
    headersTimeout: 5000,
    bodyTimeout: 5000,
  });
  const text = await res.body.text();
  if (res.statusCode !== 200) throw new Error(`answered ${res.statusCode}: ${text.slice(0, 200)}`);
  for (const block of text.split('\n\n')) {
    const event = /^event: (\w+)$/m.exec(block)?.[1];
    const data = /^data: (.*)$/m.exec(block)?.[1];
    if ((event === 'end' || event === 'error') && data !== undefined)
      return {
        id: /^id: (\d+)$/m.exec(block)?.[1],
        event,
        data: JSON.parse(data) as Record<string, unknown>,
        at: Date.now(),
      };
  }
  return undefined;
}

/** `id:event[:i|code]` of every frame a client read, across reconnects and the resume: for a violation's evidence. */
function frameLine(t: TaskTrace): string {
  return [...t.frames, ...(t.resume?.frames ?? [])]
    .map(
      (f) =>
        `${f.id ?? '-'}:${f.event}${f.event === 'token' ? `:${String(f.data.i)}` : f.event === 'error' ? `:${String(f.data.code)}` : ''}`,
    )
    .join(' ');
}

/** Every daemon line that names one of `ids`, by id (40 at most each, `source time text`), and under `*` the replicas' warnings (400 at most). */
function linesNaming(
  cluster: ReplicaCluster,
  ids: readonly string[],
  hungAt: number | undefined,
): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  if (ids.length === 0) return out;
  const lines = cluster.allLines();
  // A hang: every line of every daemon from 5 s before the first hung task was posted to 10 s after.
  if (hungAt !== undefined)
    out.around_first_hang = lines
      .filter((l) => l.at >= hungAt - 5000 && l.at <= hungAt + 10_000)
      .sort((a, b) => a.at - b.at)
      .slice(0, 50_000)
      .map((l) => `${l.source} ${l.text.slice(0, 700)}`);
  // and every replica line at warn or worse (takeovers, lost ownership, store problems), the run's story
  out['*'] = lines
    .filter((l) => l.source.startsWith('orchestratord') && typeof l.json?.level === 'number' && l.json.level >= 40)
    .sort((a, b) => a.at - b.at)
    .slice(0, 400)
    .map((l) => `${l.source} ${new Date(l.at).toISOString().slice(11, 23)} ${l.text.slice(0, 400)}`);
  for (const id of ids) {
    out[id] = lines
      .filter((l) => l.text.includes(id))
      .sort((a, b) => a.at - b.at)
      .slice(0, 40)
      .map((l) => `${l.source} ${new Date(l.at).toISOString().slice(11, 23)} ${l.text.slice(0, 500)}`);
  }
  return out;
}
