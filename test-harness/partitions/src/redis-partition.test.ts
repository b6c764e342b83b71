// Scenario 2 of .specs/90-reliability-suite.md. A task replica-a put back in the queue just before the
// link goes down (an attempt that failed before its first token) keeps that attempt's placement in its
// `queued` record: replica-b must take it over as a queued task and dispatch it, not re-attach it as a
// running one (the node never had that dispatch: the task would fail and its entry stay at the head of
// the queue, where every later task of the model would wait). On a task without a terminal frame the
// test prints what each daemon logged about it and keeps the logs.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newToken, type CapturedDaemon, type CapturedLine } from '@llama-orch/chaos';
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
import { openTask, type LiveTask, type TaskOutcome } from './lab-task.js';
import { NetLab, netnsUnavailable, type LabLink } from './net-lab.js';

const HEARTBEAT_MS = 500;
/** A task's owner lease and a cluster slot lease: app.ts's `replicaLeaseMs` for this heartbeat. */
const OWNER_TTL_MS = Math.max(2000, 2 * HEARTBEAT_MS);
const unavailable = (await netnsUnavailable()) ?? (await redisUnavailable());
if (unavailable !== undefined)
  process.stdout.write(`[partitions] replica cut off from Redis: SKIPPED, ${unavailable}\n`);

/**
 * How many dispatches the store granted each task (its record's `attempt`, which only
 * lua/task-take-dispatch.lua raises), read from Redis directly, past the cut link.
 */
async function storeAttempts(host: string, port: number, ids: readonly string[]): Promise<Map<string, number>> {
  const args = ['-h', host, '-p', String(port), '--no-raw'];
  const out = new Map<string, number>();
  for (const id of ids) {
    const r = await execa('redis-cli', [...args, 'HGET', `llorch:task:${id}`, 'attempt']);
    out.set(id, Number(/\d+/.exec(r.stdout)?.[0] ?? 0));
  }
  return out;
}

/** `msg` lines of a daemon, as JSON, with pino's own `time`. */
function jsonLines(d: CapturedDaemon, msg: string): Array<Record<string, unknown>> {
  return d.lines.flatMap((l) => (l.json?.msg === msg ? [l.json] : []));
}

/**
 * Scenario 2: replica-a reaches Redis over a direct link of its own (cut here), replica-b over the
 * bridge; clients reach both. One node (2 slots) heartbeats to replica-b.
 */
describe.skipIf(unavailable !== undefined)('a replica cut off from Redis, still reachable by clients', () => {
  const token = newToken('partitions-token');
  let lab: NetLab;
  let workDir: string;
  let link: LabLink;
  let redisAddr: { host: string; port: number };
  let redis: LabRedis | undefined;
  let replicaA: CapturedDaemon;
  let replicaB: CapturedDaemon;
  let node: CapturedDaemon;
  const daemons: CapturedDaemon[] = [];

  beforeAll(async () => {
    workDir = await mkdtemp(join(tmpdir(), 'llorch-partitions-'));
    lab = await NetLab.create();
    const redisHost = await lab.addHost('redis');
    const hostA = await lab.addHost('replica-a');
    link = await lab.link(hostA, redisHost);
    const port = 20_000 + Math.floor(Math.random() * 40_000);
    redis = await startLabRedis(lab.wrap(redisHost), redisHost.addr, port);
    redisAddr = { host: redisHost.addr, port };
    replicaB = await startReplica({
      name: 'replica-b',
      addr: `${lab.hostAddr}:0`,
      token,
      heartbeatMs: HEARTBEAT_MS,
      redisUrl: `redis://${redisHost.addr}:${port}/0`,
    });
    daemons.push(replicaB);
    replicaA = await startReplica({
      name: 'replica-a',
      addr: `${hostA.addr}:0`,
      token,
      heartbeatMs: HEARTBEAT_MS,
      redisUrl: `redis://${link.bAddr}:${port}/0`,
      wrap: lab.wrap(hostA),
    });
    daemons.push(replicaA);
    node = await startNode({
      id: 'node-1',
      poolId: 'p1',
      host: lab.hostAddr,
      orchestratorUrl: replicaB.url,
      token,
      heartbeatMs: HEARTBEAT_MS,
      slots: 2,
      workDir,
    });
    daemons.push(node);
    await waitPoolsReady(replicaB.url, token, ['p1']);
    await waitPoolsReady(replicaA.url, token, ['p1']);
  });

  afterAll(async () => {
    await Promise.all(daemons.map((d) => d.stop('SIGTERM', 5000)));
    await redis?.stop();
    await lab?.close();
    if (workDir !== undefined) await rm(workDir, { recursive: true, force: true });
  });

  /**
   * What each daemon logged about the tasks that got no terminal frame (ms from the cut), and replica-a's
   * store warnings; every line of the three daemons is kept in a temporary folder it names.
   */
  async function reportStuck(ids: readonly string[], cutAt: number): Promise<void> {
    const dir = await mkdtemp(join(tmpdir(), 'llorch-redis-partition-'));
    const out = [
      `[partitions] replica cut off from Redis: ${ids.length} task(s) without a terminal frame (every log line in ${dir}):`,
    ];
    const at = (l: CapturedLine): string => (l.json === undefined ? '?' : String(Number(l.json.time) - cutAt));
    for (const d of [replicaA, replicaB, node]) {
      await writeFile(join(dir, `${d.name.replace(/[^a-z0-9-]/gi, '_')}.log`), d.lines.map((l) => l.text).join('\n'));
      for (const l of d.lines)
        if (ids.some((id) => l.text.includes(id))) out.push(`  ${d.name} ${at(l)} ms: ${l.text.slice(0, 500)}`);
    }
    for (const l of replicaA.lines)
      if (Number(l.json?.level) >= 40 && l.json?.task_id === undefined)
        out.push(`  replica-a ${at(l)} ms: ${l.text.slice(0, 300)}`);
    process.stdout.write(`${out.join('\n')}\n`);
  }

  it('stops admitting (503 STORE_UNAVAILABLE) and dispatching; its leases lapse and no task is dispatched twice', async () => {
    // more work than the node's 2 slots, through both replicas: some of replica-a's tasks are
    // running at the cut, some queued in the shared queue
    const onA: LiveTask[] = Array.from({ length: 6 }, () =>
      openTask(replicaA.url, token, { maxTokens: 160, timeoutMs: 90_000 }),
    );
    const onB: LiveTask[] = Array.from({ length: 6 }, () =>
      openTask(replicaB.url, token, { maxTokens: 160, timeoutMs: 90_000 }),
    );
    await Promise.race(onA.map((t) => t.firstToken));

    const cutAt = Date.now();
    await lab.cutLink(link);
    // admission on replica-a: a typed 503 with Retry-After, never a hang
    let refusal: TaskOutcome | undefined;
    const admittedDuringCut: TaskOutcome[] = [];
    while (refusal === undefined && Date.now() - cutAt < 10_000) {
      const t = openTask(replicaA.url, token, { maxTokens: 8, timeoutMs: 90_000 });
      const o = await t.done;
      if (o.kind === 'refused') refusal = o;
      else admittedDuringCut.push(o);
      if (!['refused', 'end', 'error'].includes(o.kind)) await reportStuck([t.id], cutAt);
    }
    const refusedMs = (refusal?.endedAt ?? Date.now()) - cutAt;
    expect(refusal?.status, JSON.stringify(refusal)).toBe(503);
    expect(refusal?.code).toBe('STORE_UNAVAILABLE');
    expect(refusal?.retryAfter).toBeDefined();

    const ends = await Promise.all([...onA, ...onB].map((t) => t.done));
    const stuck = [...onA, ...onB].filter((_, i) => !['end', 'error'].includes(ends[i]?.kind ?? ''));
    if (stuck.length > 0)
      await reportStuck(
        stuck.map((t) => t.id),
        cutAt,
      );
    // the slot leases replica-a could neither renew nor release lapse: replica-b sees the pool free
    const freeAt = await waitFor(
      'every slot of p1 free in replica-b',
      OWNER_TTL_MS + 10_000,
      async () => {
        const p1 = (await listPools(replicaB.url, token)).find((p) => p.pool_id === 'p1');
        return p1 !== undefined && p1.slots_free === p1.slots_total ? Date.now() : undefined;
      },
      100,
    );
    // past the owner leases of replica-a's tasks: replica-b's sweep has had its turn
    await sleep(Math.max(0, cutAt + OWNER_TTL_MS + 2000 - Date.now()));
    // Every placement either replica logged, per task: a placement needs a dispatch the store granted.
    const placed = new Map<string, number>();
    for (const j of [...jsonLines(replicaA, 'task placed'), ...jsonLines(replicaB, 'task placed')])
      placed.set(String(j.task_id), (placed.get(String(j.task_id)) ?? 0) + 1);
    const granted = await storeAttempts(redisAddr.host, redisAddr.port, [...placed.keys()]);

    // every admitted task ended exactly once, with a terminal frame
    for (const e of [...ends, ...admittedDuringCut]) expect(['end', 'error'], JSON.stringify(e)).toContain(e.kind);
    // No replica placed a task without the store: not replica-a once its link was down, whatever the
    // clocks say. (A grant whose reply the cut swallowed is counted by the store and logged by nobody.)
    const unbacked = [...placed]
      .filter(([id, n]) => n > (granted.get(id) ?? 0))
      .map(([id, n]) => [id, n, granted.get(id) ?? 0]);
    expect(unbacked, 'placements the store never granted: [task, placements, grants]').toEqual([]);
    expect(placed.size, 'placements were seen at all').toBeGreaterThan(0);
    // fencing: each task reached the engine at most once
    const sent = new Map<string, number>();
    for (const j of jsonLines(node, 'engine request sent'))
      sent.set(String(j.task_id), (sent.get(String(j.task_id)) ?? 0) + 1);
    const twice = [...sent].filter(([, n]) => n > 1);
    expect(twice, 'tasks dispatched more than once').toEqual([]);
    // and the count saw them: every task that ended with its tokens reached the engine (a check that passed on zero lines proved nothing)
    const tasks = [...onA, ...onB];
    const unseen = tasks.filter((t, i) => ends[i]?.kind === 'end' && (sent.get(t.id) ?? 0) === 0).map((t) => t.id);
    expect(unseen, "ended tasks with no 'engine request sent' line").toEqual([]);
    for (const e of ends.slice(6)) expect(e.kind, `replica-b's task: ${JSON.stringify(e)}`).toBe('end');

    // the link back: replica-a admits and serves again without a restart
    const restoredAt = Date.now();
    await lab.restoreLink(link);
    const back = await waitFor(
      'replica-a admitting again',
      15_000,
      async () => {
        const o = await openTask(replicaA.url, token, { maxTokens: 8 }).done;
        return o.kind === 'end' ? o : undefined;
      },
      200,
    );

    const kinds = (xs: TaskOutcome[]): string =>
      Object.entries(
        xs.reduce<Record<string, number>>(
          (m, e) => (
            (m[e.kind === 'error' ? `error ${e.code}` : e.kind] =
              (m[`${e.kind === 'error' ? `error ${e.code}` : e.kind}`] ?? 0) + 1),
            m
          ),
          {},
        ),
      )
        .map(([k, n]) => `${n} ${k}`)
        .join(', ');
    process.stdout.write(
      `[partitions] replica cut off from Redis: first 503 STORE_UNAVAILABLE (Retry-After ${refusal?.retryAfter}) ${(refusedMs / 1000).toFixed(2)} s after the cut ` +
        `(${admittedDuringCut.length} admitted before it); replica-a's 6 tasks: ${kinds(ends.slice(0, 6))}; replica-b's 6: ${kinds(ends.slice(6))} (TTFT max ${Math.max(...ends.slice(6).map((e) => (e.firstTokenAt ?? e.endedAt) - e.admittedAt))} ms); ` +
        `p1 all free in replica-b ${((freeAt - cutAt) / 1000).toFixed(1)} s after the cut; ` +
        `${placed.size} tasks placed, each placement granted by the store; ${sent.size} tasks reached the engine, none twice; replica-a served again ${((back.endedAt - restoredAt) / 1000).toFixed(2)} s after the link came back\n`,
    );
  });
});
