import { readFile, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { repoRoot, runHaiku, startCluster, type Cluster, type RecordedFrame } from './index.js';

// orchestratord against real pool-managerds and llama-servers when engines or nodes fail.
// A somewhat larger synthetic model makes prompt processing long enough to kill an engine
// between dispatch and the first token; small batches (`-b 128`) split a long prompt over several
// engine iterations, and llama-server answers `/slots` between them, so the test can see "prompt
// processing, no token yet" and kill there.
const MODEL = 'synthetic:llama?layers=4&embd=256&heads=4&ff=512&ctx=4096';
const HEARTBEAT_MS = 500;
const SMALL_BATCHES = { extraFlags: ['-b', '128', '-ub', '128'] };
const cacheDir = process.env.LLORCH_TEST_CACHE_DIR ?? join(repoRoot(), '.cache', 'llama-orch');

let cluster: Cluster;

beforeAll(async () => {
  cluster = await startCluster({
    model: MODEL,
    nodes: 2,
    gpu: 'off',
    cacheDir,
    heartbeatMs: HEARTBEAT_MS,
    readyTimeoutMs: 30 * 60_000,
    pools: [SMALL_BATCHES, SMALL_BATCHES],
  });
}, 31 * 60_000);

afterAll(async () => {
  await cluster?.close();
}, 60_000);

const auth = (): Record<string, string> => ({ authorization: `Bearer ${cluster.token}` });

/** The engine pid and URL of a node's pool, from the handoff file pool-managerd wrote. */
async function engineOf(nodeIndex: number): Promise<{ pid: number; url: string }> {
  const dir = join(cluster.nodes[nodeIndex]!.runtimeDir, 'engines');
  const file = (await readdir(dir)).find((f) => f.endsWith('.json'));
  if (!file) throw new Error(`no handoff file in ${dir}`);
  const handoff = JSON.parse(await readFile(join(dir, file), 'utf8')) as { pid: number; url: string };
  return handoff;
}

/** Waits for a handoff file of a live engine other than `previousPid` (a restart after a kill). */
async function newEngine(nodeIndex: number, previousPid: number): Promise<{ pid: number; url: string }> {
  let found: { pid: number; url: string } | undefined;
  await waitFor(
    async () => {
      found = await engineOf(nodeIndex).catch(() => undefined);
      return found !== undefined && found.pid !== previousPid;
    },
    120_000,
    `a restarted engine on node ${nodeIndex + 1}`,
  );
  return found!;
}

async function poolReady(poolId: string): Promise<boolean> {
  const res = await request(new URL('/v2/pools', cluster.orchestrator.url), { headers: auth() });
  const body = (await res.body.json()) as { pools: Array<{ pool_id: string; ready: boolean; node_state: string }> };
  return body.pools.some((p) => p.pool_id === poolId && p.ready && p.node_state === 'online');
}

async function waitFor(cond: () => Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await cond()) return;
    await sleep(50);
  }
  throw new Error(`timed out waiting for ${what}`);
}

async function nodeState(nodeId: string): Promise<string | undefined> {
  const res = await request(new URL('/v2/nodes', cluster.orchestrator.url), { headers: auth() });
  const body = (await res.body.json()) as { nodes: Array<{ node_id: string; state: string }> };
  return body.nodes.find((n) => n.node_id === nodeId)?.state;
}

const preferFirst = { mode: 'prefer', prefer_pools: ['p1'], allow_fallback: true };

describe('orchestratord with real pool-managerds: engine and node failures', () => {
  it('engine killed after the first token → the stream ends with WORKER_RESET', async () => {
    await waitFor(() => poolReady('p1'), 120_000, 'p1 ready');
    const { pid } = await engineOf(0);
    let killed = false;
    const run = await runHaiku({
      orchUrl: cluster.orchestrator.url,
      token: cluster.token,
      model: MODEL,
      seed: 3,
      maxTokens: 1200,
      pinPoolId: 'p1',
      onFrame: (f: RecordedFrame) => {
        if (f.event === 'token' && !killed) {
          killed = true;
          process.kill(pid, 'SIGKILL');
        }
      },
    });
    expect(killed).toBe(true);
    const terminal = run.frames.at(-1);
    expect(terminal).toMatchObject({ event: 'error', data: { code: 'WORKER_RESET', retriable: true } });
    expect(run.frames.filter((f) => f.event === 'error' || f.event === 'end')).toHaveLength(1);
    // the supervisor restarts the engine (a new process, never the dead one) and the pool comes back
    await newEngine(0, pid);
    await waitFor(() => poolReady('p1'), 120_000, 'p1 ready again after restart');
  }, 300_000);

  it('engine killed before the first token → the task is re-placed on the other pool', async () => {
    // The kill has to land while p1 is in prompt processing: /slots saying "processing" between two
    // of the prompt's ~12 batches of 128 tokens leaves the rest of the prompt as headroom. Should the
    // first token still come first (the kill arrived too late: the case of the test above), the
    // attempt is reported and retried, at most 3 attempts; the last one is judged whatever happened.
    const prompt = 'the quick brown fox jumps over the lazy dog '.repeat(160);
    const outcomes: string[] = [];
    for (let attempt = 1; attempt <= 3; attempt++) {
      await waitFor(async () => (await poolReady('p1')) && (await poolReady('p2')), 120_000, 'both pools ready');
      const { pid, url } = await engineOf(0);
      const done = runHaikuWithPrompt(prompt);
      const deadline = Date.now() + 60_000;
      let busy = false;
      let settled = false;
      void done.finally(() => {
        settled = true;
      });
      while (!busy && !settled && Date.now() < deadline) {
        const slots = (await (await request(new URL('/slots', url))).body.json()) as Array<{ is_processing: boolean }>;
        busy = slots.some((s) => s.is_processing);
        if (!busy) await sleep(2);
      }
      expect(
        busy,
        `p1 engine started processing (task frames: ${settled ? JSON.stringify((await done).slice(-2)) : 'still running'})`,
      ).toBe(true);
      process.kill(pid, 'SIGKILL');
      const frames = await done;
      await newEngine(0, pid);
      const terminals = frames.filter((f) => f.event === 'end' || f.event === 'error');
      const tokenBeforeKill = frames.some((f) => f.event === 'token') && terminals[0]?.event === 'error';
      outcomes.push(
        `attempt ${attempt}: ${frames
          .map((f) => f.event)
          .filter((e) => e !== 'metrics')
          .join(',')}`,
      );
      if (tokenBeforeKill && attempt < 3) continue; // the first token won the race: not this test's case
      process.stdout.write(`[failover] kill before the first token: ${outcomes.join(' | ')}\n`);
      expect(terminals, outcomes.join(' | ')).toHaveLength(1);
      expect(
        frames.filter((f) => f.event === 'error'),
        outcomes.join(' | '),
      ).toEqual([]);
      expect(frames.at(-1)).toMatchObject({ event: 'end', data: { pool_id: 'p2' } });
      break;
    }
    await waitFor(() => poolReady('p1'), 120_000, 'p1 ready again');
  }, 600_000);

  it('a frozen pool-managerd (SIGSTOP) goes offline within the heartbeat budget; its work runs elsewhere; SIGCONT brings it back', async () => {
    await waitFor(async () => (await poolReady('p1')) && (await poolReady('p2')), 120_000, 'both pools ready');
    const n1 = cluster.nodes[0]!;
    process.kill(n1.daemon.pid, 'SIGSTOP');
    const stoppedAt = Date.now();
    try {
      // admitted while n1 still looks online: may be dispatched to the frozen node first
      const run = runHaiku({
        orchUrl: cluster.orchestrator.url,
        token: cluster.token,
        model: MODEL,
        seed: 5,
        maxTokens: 8,
        pinPoolId: undefined,
      });
      await waitFor(async () => (await nodeState(n1.id)) === 'offline', 10_000, 'n1 offline');
      const detectMs = Date.now() - stoppedAt;
      // offline is declared 3 intervals after the last heartbeat, checked every interval/20;
      // the last heartbeat was at most one interval before the SIGSTOP
      expect(detectMs).toBeLessThanOrEqual(4 * HEARTBEAT_MS + 250);
      const result = await run;
      expect(result.frames.at(-1)).toMatchObject({ event: 'end', data: { pool_id: 'p2' } });
      const after = await runHaiku({
        orchUrl: cluster.orchestrator.url,
        token: cluster.token,
        model: MODEL,
        seed: 6,
        maxTokens: 8,
      });
      expect(after.frames.at(-1)).toMatchObject({ event: 'end', data: { pool_id: 'p2' } });
    } finally {
      process.kill(n1.daemon.pid, 'SIGCONT');
    }
    await waitFor(async () => (await nodeState(n1.id)) === 'online', 10_000, 'n1 online again');
    await waitFor(() => poolReady('p1'), 30_000, 'p1 placeable again');
  }, 300_000);
});

async function runHaikuWithPrompt(prompt: string): Promise<RecordedFrame[]> {
  const { randomUUID } = await import('node:crypto');
  const { recordStream } = await import('./sse-recorder.js');
  const taskId = randomUUID();
  const res = await request(new URL('/v2/tasks', cluster.orchestrator.url), {
    method: 'POST',
    headers: { ...auth(), 'content-type': 'application/json' },
    body: JSON.stringify({
      task_id: taskId,
      session_id: randomUUID(),
      workload: 'completion',
      model_ref: MODEL,
      engine: 'llamacpp',
      ctx: 0,
      priority: 'interactive',
      seed: 11,
      determinism: 'strict',
      prompt,
      max_tokens: 8,
      deadline_ms: 120_000,
      placement: preferFirst,
    }),
  });
  const admission = (await res.body.json()) as { streams?: { sse: string } };
  if (res.statusCode !== 202 || !admission.streams)
    throw new Error(`admission failed: ${res.statusCode} ${JSON.stringify(admission)}`);
  return (await recordStream(admission.streams.sse, auth())).frames;
}
