import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newToken, type ChaosDaemon } from '@llama-orch/chaos';
import { listPools, startNode, startReplica, waitFor, waitPoolsReady } from './lab-daemons.js';
import { openTask, type TaskOutcome } from './lab-task.js';
import { NetLab, netnsUnavailable, type LabHost } from './net-lab.js';

const HEARTBEAT_MS = 500;
const unavailable = await netnsUnavailable();
if (unavailable !== undefined) process.stdout.write(`[partitions] node cut off: SKIPPED, ${unavailable}\n`);

/**
 * Scenario 1: a pool-managerd cut off from orchestratord (its veth's bridge port down). Two nodes
 * in their own namespaces serve the model; orchestratord, the clients and the test stay in the root
 * namespace.
 */
describe.skipIf(unavailable !== undefined)('a node cut off from every replica (link down)', () => {
  const token = newToken('partitions-token');
  let lab: NetLab;
  let workDir: string;
  let hostA: LabHost;
  let orch: ChaosDaemon;
  const daemons: ChaosDaemon[] = [];

  beforeAll(async () => {
    workDir = await mkdtemp(join(tmpdir(), 'llorch-partitions-'));
    lab = await NetLab.create();
    hostA = await lab.addHost('node-a');
    const hostB = await lab.addHost('node-b');
    orch = await startReplica({ name: 'orchestratord', addr: `${lab.hostAddr}:0`, token, heartbeatMs: HEARTBEAT_MS });
    daemons.push(orch);
    for (const [host, id, poolId] of [
      [hostA, 'node-a', 'pa'],
      [hostB, 'node-b', 'pb'],
    ] as const) {
      daemons.push(
        await startNode({ id, poolId, host: host.addr, orchestratorUrl: orch.url, token, heartbeatMs: HEARTBEAT_MS, slots: 2, ctx: 4096, workDir, wrap: lab.wrap(host) }),
      );
    }
    await waitPoolsReady(orch.url, token, ['pa', 'pb']);
  });

  afterAll(async () => {
    await Promise.all(daemons.map((d) => d.stop('SIGTERM', 5000)));
    await lab?.close();
    if (workDir !== undefined) await rm(workDir, { recursive: true, force: true });
  });

  it('goes offline within 3 intervals, its work is placed elsewhere or ended per the policy, and it rejoins', async () => {
    // node-a: one long task streaming (1 of 2 slots); node-b: both slots busy for a few seconds
    const streaming = openTask(orch.url, token, { maxTokens: 1900, pin: 'pa' });
    const busyB = [openTask(orch.url, token, { maxTokens: 600, pin: 'pb' }), openTask(orch.url, token, { maxTokens: 600, pin: 'pb' })];
    await Promise.all([streaming.firstToken, ...busyB.map((t) => t.firstToken)]);

    const cutAt = Date.now();
    await lab.cut(hostA);
    // work that prefers node-a: it still looks online with a free slot, so the first of these is
    // dispatched there (before any token) and must be re-placed; all must end up on node-b
    const queued = Array.from({ length: 5 }, () => openTask(orch.url, token, { maxTokens: 24, prefer: 'pa', fallback: true }));

    const offlineAt = await waitFor(
      'node-a offline',
      10_000,
      async () => ((await listPools(orch.url, token)).some((p) => p.node_id === 'node-a' && p.node_state === 'offline') ? Date.now() : undefined),
      20,
    );
    const offlineMs = offlineAt - cutAt;

    const streamingEnd = await streaming.done;
    const queuedEnds = await Promise.all(queued.map((t) => t.done));
    const busyEnds = await Promise.all(busyB.map((t) => t.done));

    expect(offlineMs).toBeLessThanOrEqual(3 * HEARTBEAT_MS + 300);
    // after its first token: an error frame, never silence nor a restart elsewhere
    expect(streamingEnd.kind, JSON.stringify(streamingEnd)).toBe('error');
    expect(streamingEnd.tokens).toBeGreaterThan(0);
    for (const e of [...queuedEnds, ...busyEnds]) expect(e.kind, JSON.stringify(e)).toBe('end');
    for (const e of queuedEnds) expect(e.nodeId).toBe('node-b');

    // orchestratord's log lines reach us after the frames: wait for every queued task's end line
    await waitFor('the end lines of the queued tasks', 5000, async () =>
      queued.every((t) => orch.lines.some((l) => l.json?.msg === 'task ended' && l.json.task_id === t.id)) ? true : undefined,
    );
    const lines = orch.lines.filter((l) => l.json !== undefined).map((l) => l.json as Record<string, unknown>);
    const requeuedFromA = queued.filter((t) => lines.some((j) => j.msg === 'task re-queued' && j.task_id === t.id && j.node_id === 'node-a'));
    expect(requeuedFromA.length, 'a task dispatched to the cut node before its first token').toBeGreaterThanOrEqual(1);
    const ttft = (e: TaskOutcome): number => (e.firstTokenAt ?? e.endedAt) - e.admittedAt;
    // re-placed within the dispatch accept timeout (1 s here), not undici's 10 s connect timeout
    for (const t of requeuedFromA) expect(ttft(queuedEnds[queued.indexOf(t)] as TaskOutcome), `TTFT of re-placed task ${t.id}`).toBeLessThan(3000);
    // each task placed at most once per pool it ran on, and once on node-b
    for (const t of queued) {
      const placedOnB = lines.filter((j) => j.msg === 'task placed' && j.task_id === t.id && j.node_id === 'node-b').length;
      expect(placedOnB, `task ${t.id} placed on node-b`).toBe(1);
    }

    const restoredAt = Date.now();
    await lab.restore(hostA);
    const onlineAt = await waitFor(
      'node-a online again',
      15_000,
      async () => ((await listPools(orch.url, token)).some((p) => p.pool_id === 'pa' && p.ready && p.node_state === 'online') ? Date.now() : undefined),
      20,
    );
    const after = await openTask(orch.url, token, { maxTokens: 16, pin: 'pa' }).done;
    expect(after.kind, JSON.stringify(after)).toBe('end');
    expect(after.nodeId).toBe('node-a');

    process.stdout.write(
      `[partitions] node cut off: node-a offline after ${(offlineMs / 1000).toFixed(2)} s (3 intervals = ${((3 * HEARTBEAT_MS) / 1000).toFixed(1)} s); ` +
        `${queuedEnds.length} queued tasks ended on node-b (${requeuedFromA.length} dispatched to node-a before a token and re-placed; their TTFT ${queued
          .map((_, i) => ttft(queuedEnds[i] as TaskOutcome))
          .join('/')} ms); 1 streaming task ended with error ${streamingEnd.code} after ${streamingEnd.tokens} tokens; ` +
        `rejoined ${((onlineAt - restoredAt) / 1000).toFixed(2)} s after the link came back, new task served there\n`,
    );
  });
});
