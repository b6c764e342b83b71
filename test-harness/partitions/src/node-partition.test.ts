import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newToken, type CapturedDaemon } from '@llama-orch/chaos';
import {
  listPools,
  redisUnavailable,
  startLabRedis,
  startNode,
  startReplica,
  waitFor,
  waitPoolsReady,
  type LabRedis,
} from './lab-daemons.js';
import { openTask, type TaskOutcome } from './lab-task.js';
import { NetLab, netnsUnavailable, type LabHost } from './net-lab.js';

const HEARTBEAT_MS = 500;
const unavailable = (await netnsUnavailable()) ?? (await redisUnavailable());
if (unavailable !== undefined) process.stdout.write(`[partitions] node cut off: SKIPPED, ${unavailable}\n`);

/**
 * Scenario 1: a pool-managerd cut off from every replica (its veth's bridge port down). Two nodes
 * in their own namespaces serve the model; two replicas sharing Redis (its own namespace), the
 * clients and the test stay in the root namespace. Nodes heartbeat to r1; the streaming task runs
 * through r2, which learns of the node's fate only through the store.
 */
describe.skipIf(unavailable !== undefined)('a node cut off from every replica (link down)', () => {
  const token = newToken('partitions-token');
  let lab: NetLab;
  let workDir: string;
  let hostA: LabHost;
  let r1: CapturedDaemon;
  let r2: CapturedDaemon;
  let redis: LabRedis | undefined;
  const nodes = new Map<string, CapturedDaemon>();
  const daemons: CapturedDaemon[] = [];
  /** Every JSON line of both replicas. */
  const replicaLines = (): Array<Record<string, unknown>> =>
    [r1, r2].flatMap((r) => r.lines.flatMap((l) => (l.json === undefined ? [] : [l.json])));
  /** When each replica lists node-a in `state` (polled every 20 ms). */
  const bothSee = (
    what: string,
    state: (p: { pool_id: string; node_state: string; ready: boolean }) => boolean,
  ): Promise<number[]> =>
    Promise.all(
      [r1, r2].map((r) =>
        waitFor(
          `${r.name}: ${what}`,
          15_000,
          async () =>
            (await listPools(r.url, token)).some((p) => p.pool_id === 'pa' && state(p)) ? Date.now() : undefined,
          20,
        ),
      ),
    );

  beforeAll(async () => {
    workDir = await mkdtemp(join(tmpdir(), 'llorch-partitions-'));
    lab = await NetLab.create();
    hostA = await lab.addHost('node-a');
    const hostB = await lab.addHost('node-b');
    const redisHost = await lab.addHost('redis');
    const port = 20_000 + Math.floor(Math.random() * 40_000);
    redis = await startLabRedis(lab.wrap(redisHost), redisHost.addr, port);
    const redisUrl = `redis://${redisHost.addr}:${port}/0`;
    r1 = await startReplica({ name: 'r1', addr: `${lab.hostAddr}:0`, token, heartbeatMs: HEARTBEAT_MS, redisUrl });
    r2 = await startReplica({ name: 'r2', addr: `${lab.hostAddr}:0`, token, heartbeatMs: HEARTBEAT_MS, redisUrl });
    daemons.push(r1, r2);
    for (const [host, id, poolId] of [
      [hostA, 'node-a', 'pa'],
      [hostB, 'node-b', 'pb'],
    ] as const) {
      const node = await startNode({
        id,
        poolId,
        host: host.addr,
        orchestratorUrl: r1.url,
        token,
        heartbeatMs: HEARTBEAT_MS,
        slots: 2,
        ctx: 4096,
        workDir,
        wrap: lab.wrap(host),
      });
      nodes.set(id, node);
      daemons.push(node);
    }
    for (const r of [r1, r2]) await waitPoolsReady(r.url, token, ['pa', 'pb']);
  });

  afterAll(async () => {
    await Promise.all(daemons.map((d) => d.stop('SIGTERM', 5000)));
    await redis?.stop();
    await lab?.close();
    if (workDir !== undefined) await rm(workDir, { recursive: true, force: true });
  });

  it('goes offline within 3 intervals, its work is placed elsewhere or ended per the policy, and it rejoins', async () => {
    // node-a: one long task streaming (1 of 2 slots); node-b: both slots busy for a few seconds
    const streaming = openTask(r2.url, token, { maxTokens: 1900, pin: 'pa' });
    const busyB = [
      openTask(r1.url, token, { maxTokens: 600, pin: 'pb' }),
      openTask(r2.url, token, { maxTokens: 600, pin: 'pb' }),
    ];
    await Promise.all([streaming.firstToken, ...busyB.map((t) => t.firstToken)]);

    const cutAt = Date.now();
    await lab.cut(hostA);
    // work that prefers node-a: it still looks online with a free slot, so the first of these is
    // dispatched there (before any token) and must be re-placed; all must end up on node-b
    const queued = Array.from({ length: 5 }, (_, i) =>
      openTask((i % 2 === 0 ? r1 : r2).url, token, { maxTokens: 24, prefer: 'pa', fallback: true }),
    );

    const offlineMs = (await bothSee('node-a offline', (p) => p.node_state === 'offline')).map((at) => at - cutAt);

    const streamingEnd = await streaming.done;
    const queuedEnds = await Promise.all(queued.map((t) => t.done));
    const busyEnds = await Promise.all(busyB.map((t) => t.done));

    // 3 intervals after the last heartbeat sent (before the cut), + interval/4 for the store's
    // liveness check (.specs/60-orchestratord.md), + 300 ms of polling and timer slack
    for (const ms of offlineMs) expect(ms).toBeLessThanOrEqual(3.25 * HEARTBEAT_MS + 300);
    // after its first token: an error frame, never silence nor a restart elsewhere
    expect(streamingEnd.kind, JSON.stringify(streamingEnd)).toBe('error');
    expect(streamingEnd.tokens).toBeGreaterThan(0);
    for (const e of [...queuedEnds, ...busyEnds]) expect(e.kind, JSON.stringify(e)).toBe('end');
    for (const e of queuedEnds) expect(e.nodeId).toBe('node-b');

    // the replicas' log lines reach us after the frames: wait for every queued task's end line
    await waitFor('the end lines of the queued tasks', 5000, async () =>
      queued.every((t) => replicaLines().some((j) => j.msg === 'task ended' && j.task_id === t.id)) ? true : undefined,
    );
    const lines = replicaLines();
    const requeuedFromA = queued.filter((t) =>
      lines.some((j) => j.msg === 'task re-queued' && j.task_id === t.id && j.node_id === 'node-a'),
    );
    expect(requeuedFromA.length, 'a task dispatched to the cut node before its first token').toBeGreaterThanOrEqual(1);
    const ttft = (e: TaskOutcome): number => (e.firstTokenAt ?? e.endedAt) - e.admittedAt;
    // re-placed after the dispatch accept timeout (1 s here) and a wait for a slot of node-b, not
    // undici's 10 s connect timeout
    for (const t of requeuedFromA)
      expect(ttft(queuedEnds[queued.indexOf(t)] as TaskOutcome), `TTFT of re-placed task ${t.id}`).toBeLessThan(5000);
    // each reached node-b's engine once (a placement the node refused as saturated — the replicas
    // race for its slots — sends nothing to the engine)
    const nodeB = nodes.get('node-b') as CapturedDaemon;
    await waitFor("node-b's end lines of the queued tasks", 5000, async () =>
      queued.every((t) => nodeB.lines.some((l) => l.json?.msg === 'dispatch ended' && l.json.task_id === t.id))
        ? true
        : undefined,
    );
    for (const t of queued) {
      const sent = nodes
        .get('node-b')
        ?.lines.filter((l) => l.json?.msg === 'engine request sent' && l.json.task_id === t.id).length;
      expect(sent, `task ${t.id} sent to node-b's engine`).toBe(1);
    }

    const restoredAt = Date.now();
    await lab.restore(hostA);
    const onlineAt = Math.max(...(await bothSee('node-a online again', (p) => p.ready && p.node_state === 'online')));
    const after = await openTask(r2.url, token, { maxTokens: 16, pin: 'pa' }).done;
    expect(after.kind, JSON.stringify(after)).toBe('end');
    expect(after.nodeId).toBe('node-a');

    process.stdout.write(
      `[partitions] node cut off (2 replicas on Redis): node-a offline in r1/r2 after ${offlineMs.map((ms) => (ms / 1000).toFixed(2)).join('/')} s (3 intervals = ${((3 * HEARTBEAT_MS) / 1000).toFixed(1)} s); ` +
        `${queuedEnds.length} queued tasks ended on node-b (${requeuedFromA.length} dispatched to node-a before a token and re-placed; their TTFT ${queued
          .map((_, i) => ttft(queuedEnds[i] as TaskOutcome))
          .join(
            '/',
          )} ms); 1 streaming task (through r2) ended with error ${streamingEnd.code} after ${streamingEnd.tokens} tokens; ` +
        `rejoined (both replicas) ${((onlineAt - restoredAt) / 1000).toFixed(2)} s after the link came back, new task served there\n`,
    );
  });
});
