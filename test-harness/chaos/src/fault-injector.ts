import { setTimeout as sleep } from 'node:timers/promises';
import { request } from 'undici';
import type { ChaosCluster, ChaosNode } from './chaos-cluster.js';
import { cmdline, pidAlive } from './proc.js';
import type { RestartWindow } from './task-invariants.js';

export type FaultKind = 'kill_engine' | 'sigstop_node' | 'restart_orchestrator' | 'kill_replica' | 'kill_redis';

/** What the engine and node faults need of a cluster (one orchestratord or replicas behind a balancer). */
export type FaultTarget = Pick<ChaosCluster, 'url' | 'auth' | 'nodePools' | 'handoffs'>;

/** One injected fault, what it hit and how the cluster recovered. */
export interface FaultRecord {
  kind: FaultKind;
  at: string;
  target: string;
  pid: number;
  details: Record<string, unknown>;
  /** Fault → cluster serving again, ms. */
  recoveredMs: number | undefined;
  problems: string[];
}

export async function until<T>(
  what: () => Promise<T | undefined>,
  timeoutMs: number,
  everyMs = 50,
): Promise<T | undefined> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const v = await what().catch(() => undefined);
    if (v !== undefined) return v;
    await sleep(everyMs);
  }
  return undefined;
}

async function nodeInfo(
  cluster: FaultTarget,
  nodeId: string,
): Promise<{ state: string; lastSeen: number } | undefined> {
  const res = await request(new URL('/v2/nodes', cluster.url), {
    headers: cluster.auth,
    headersTimeout: 5000,
    bodyTimeout: 5000,
  });
  const body = (await res.body.json()) as { nodes?: Array<{ node_id: string; state: string; last_seen: string }> };
  const n = body.nodes?.find((x) => x.node_id === nodeId);
  return n === undefined ? undefined : { state: n.state, lastSeen: Date.parse(n.last_seen) };
}

async function nodeState(cluster: FaultTarget, nodeId: string): Promise<string | undefined> {
  return (await nodeInfo(cluster, nodeId))?.state;
}

async function poolReadyOnNode(cluster: FaultTarget, node: ChaosNode): Promise<boolean> {
  const pools = await cluster.nodePools(node);
  return pools.some((p) => p.pool_id === node.poolId && p.ready);
}

/** kill -9 of the node's managed llama-server (pid from its handoff file); waits for the restart. */
export async function killEngine(cluster: FaultTarget, node: ChaosNode): Promise<FaultRecord> {
  const rec: FaultRecord = {
    kind: 'kill_engine',
    at: new Date().toISOString(),
    target: `${node.id}/${node.poolId}`,
    pid: 0,
    details: {},
    recoveredMs: undefined,
    problems: [],
  };
  const handoff = (await cluster.handoffs(node)).find(
    (h) => h.pool_id === node.poolId && h.provisioning_mode === 'managed',
  );
  if (handoff === undefined) {
    rec.problems.push(`no managed handoff file for ${node.poolId}`);
    return rec;
  }
  rec.pid = handoff.pid;
  const argv = cmdline(handoff.pid) ?? [];
  if (!argv.some((a) => a.endsWith('llama-server'))) {
    rec.problems.push(`handoff pid ${handoff.pid} is not a llama-server (${argv.join(' ')})`);
    return rec;
  }
  const t0 = Date.now();
  process.kill(handoff.pid, 'SIGKILL');
  const back = await until(async () => {
    const now = (await cluster.handoffs(node)).find((h) => h.pool_id === node.poolId && h.pid !== handoff.pid);
    return now !== undefined && (await poolReadyOnNode(cluster, node)) ? now : undefined;
  }, 60_000);
  if (pidAlive(handoff.pid)) rec.problems.push(`engine ${handoff.pid} still alive after SIGKILL`);
  if (back === undefined) rec.problems.push('pool not ready with a new engine within 60 s');
  else {
    rec.recoveredMs = Date.now() - t0;
    rec.details.new_pid = back.pid;
  }
  return rec;
}

/**
 * SIGSTOP of a pool-managerd until orchestratord marks its node offline (3 missed heartbeats)
 * and at least 3 × interval + margin passed, then SIGCONT; waits until it is online and ready.
 */
export async function stopNode(cluster: FaultTarget, node: ChaosNode, heartbeatMs: number): Promise<FaultRecord> {
  const pid = node.daemon.pid;
  const rec: FaultRecord = {
    kind: 'sigstop_node',
    at: new Date().toISOString(),
    target: node.id,
    pid,
    details: {},
    recoveredMs: undefined,
    problems: [],
  };
  const timeoutMs = 3 * heartbeatMs;
  const t0 = Date.now();
  process.kill(pid, 'SIGSTOP');
  try {
    // Every poll: offline must not show before 3 intervals passed since the node's last heartbeat
    // (orchestratord's own `last_seen`), and must show some time after.
    const offline = await until(
      async () => {
        const info = await nodeInfo(cluster, node.id);
        const now = Date.now();
        if (info?.state !== 'offline') return undefined;
        const silentMs = now - info.lastSeen;
        if (silentMs < timeoutMs - 50)
          rec.problems.push(
            `${node.id} offline after only ${silentMs} ms without a heartbeat (timeout ${timeoutMs} ms)`,
          );
        rec.details.silent_ms_when_seen_offline = silentMs;
        return now;
      },
      timeoutMs * 4 + 5000,
      25,
    );
    if (offline === undefined) rec.problems.push(`orchestratord never marked ${node.id} offline while it was stopped`);
    else rec.details.offline_after_ms = offline - t0;
    const minStopped = timeoutMs + 2 * heartbeatMs;
    if (Date.now() - t0 < minStopped) await sleep(minStopped - (Date.now() - t0));
  } finally {
    process.kill(pid, 'SIGCONT');
  }
  const stoppedMs = Date.now() - t0;
  rec.details.stopped_ms = stoppedMs;
  const t1 = Date.now();
  const online = await until(
    async () =>
      (await nodeState(cluster, node.id)) === 'online' && (await poolReadyOnNode(cluster, node)) ? true : undefined,
    30_000,
  );
  if (online === undefined) rec.problems.push(`${node.id} not online again within 30 s of SIGCONT`);
  else {
    rec.details.online_after_cont_ms = Date.now() - t1;
    rec.recoveredMs = Date.now() - t0;
  }
  return rec;
}

/**
 * Restarts orchestratord on the same port (SIGTERM: tasks it holds end with an error frame) and
 * waits until every node re-registered and its pools are ready again.
 */
export async function restartOrchestrator(cluster: ChaosCluster, window: RestartWindow): Promise<FaultRecord> {
  const rec: FaultRecord = {
    kind: 'restart_orchestrator',
    at: new Date().toISOString(),
    target: 'orchestratord',
    pid: cluster.orchestrator.pid,
    details: {},
    recoveredMs: undefined,
    problems: [],
  };
  window.begunAt = Date.now();
  const r = await cluster.restartOrchestrator('SIGTERM');
  window.listeningAt = Date.now();
  rec.details = { old_pid: r.oldPid, new_pid: r.newPid, old_exit: r.exit, down_ms: r.downMs };
  if (r.exit.code !== 0) rec.problems.push(`orchestratord exited with ${r.exit.code ?? r.exit.signal} on SIGTERM`);
  try {
    await cluster.waitPoolsReady(60_000);
    rec.recoveredMs = Date.now() - window.begunAt;
    const res = await request(new URL('/v2/nodes', cluster.url), { headers: cluster.auth });
    const body = (await res.body.json()) as { nodes: Array<{ node_id: string; state: string }> };
    rec.details.nodes_after = body.nodes.map((n) => `${n.node_id}:${n.state}`);
    for (const n of cluster.nodes) {
      if (!body.nodes.some((x) => x.node_id === n.id)) rec.problems.push(`${n.id} did not re-register`);
    }
  } catch (err) {
    rec.problems.push(`nodes did not re-register: ${(err as Error).message}`);
  }
  return rec;
}
