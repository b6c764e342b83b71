import { randomUUID } from 'node:crypto';
import { readdirSync, readFileSync, type Dirent } from 'node:fs';
import { dirname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { freeLoopbackPort } from '@llama-orch/daemon-support';
import { startRedisServer } from '@llama-orch/daemon-support/redis-server';
import { Agent, request } from 'undici';
import type { FileLoggedDaemon } from '@llama-orch/daemon-support/daemon-launcher';
import { BenchError } from '../errors.js';
import { COLD_START_TIMEOUT_MS, startOrchestratord, startPoolManagerd, waitPoolsReady } from './cluster.js';
import { profFlags, type BenchContext } from './context.js';
import { expectJson } from './http.js';
import { ensureNginx, startNginxHop, type NginxHop } from './nginx.js';
import { followTask, indexFaults, type FollowedTask } from './resuming-client.js';

/**
 * The failover benchmark's replica SIGKILL trial: 3 orchestratord replicas on one redis-server
 * behind nginx (round-robin), one pool-managerd (real llama-server) registered through nginx.
 * Replica a admits everything (the clients POST to it directly, so it owns every task by
 * construction): N long /v2 generations on pool `as`, and M /v2 tasks queued on pool `aq`, whose
 * one slot a /v1 stream through replica a holds. Replica a is SIGKILLed; every client reconnects
 * through nginx with Last-Event-ID 100 ms after its stream broke, as an EventSource would.
 */

/** A wide feed-forward makes each token cost ~ms on one thread: generations outlast the failover. */
export const ADOPT_MODEL = 'synthetic:llama?layers=2&embd=128&heads=4&ff=8192&ctx=4096';
const STREAM_POOL = 'as';
const QUEUE_POOL = 'aq';
const RETRY_MS = 100;
/** The synthetic model's tokenizer is llama's SPM vocab: `</s>` is token 2. Banned, so no generation ends early by chance. */
const NO_EOS = { '2': -100 };

/**
 * The queue pool's model: as slow, but another model ref, so that the /v1 stream holding its slot
 * (OpenAI requests cannot pin a pool) can only be placed there.
 */
export const ADOPT_QUEUE_MODEL = 'synthetic:llama?layers=2&embd=128&heads=4&ff=8192&ctx=2048';

function jsFiles(dir: string): string[] {
  let entries: Dirent[];
  try {
    entries = readdirSync(dir, { withFileTypes: true });
  } catch {
    return [];
  }
  return entries.flatMap((e) =>
    e.isDirectory() ? jsFiles(join(dir, e.name)) : e.name.endsWith('.js') ? [join(dir, e.name)] : [],
  );
}

/**
 * Whether this orchestratord build adopts a dead replica's tasks: the reason it does not, or
 * undefined when it does. The build is asked, not assumed: adoption takes orphaned tasks, found by
 * the task ownership store's `lapsed` (store/task-ownership-store.ts); a build where nothing
 * outside the store implementations calls it cannot adopt.
 */
export function adoptionMissing(orchestratordMain: string): string | undefined {
  const dist = dirname(orchestratordMain);
  const callers = jsFiles(dist).filter(
    (f) =>
      !f.startsWith(join(dist, 'store')) && !f.endsWith('.test.js') && readFileSync(f, 'utf8').includes('.lapsed('),
  );
  return callers.length > 0 ? undefined : 'replica adoption not on this build';
}

export interface AdoptionTrial {
  streams: Array<{
    taskId: string;
    adoptedMs: number;
    resumedMs: number;
    gaps: number;
    duplicates: number;
    ends: number;
    errors: string[];
    connections: number;
    tokens: number;
    refusals: string[];
  }>;
  queued: Array<{
    taskId: string;
    priority: string;
    admittedIndex: number;
    /** Kill → a survivor's `orphaned task adopted` line for it, ms (its log's clock, ms resolution). */
    adoptedMs: number;
    adoptedBy: string | undefined;
    startMs: number;
    tokensBeforeKill: number;
    ends: number;
    errors: string[];
  }>;
  /** Queued tasks in the order their first token arrived (admission indices). */
  startOrder: number[];
  /** The order they should start in: interactive before batch, each by admission. */
  expectedOrder: number[];
  /** Tokens each stream had before the kill (the generations were mid-way). */
  tokensBeforeKill: number[];
}

async function admit(url: string, token: string, body: Record<string, unknown>): Promise<string> {
  const taskId = randomUUID();
  await expectJson('POST', `${url}/v2/tasks`, 202, { token, body: { task_id: taskId, ...body } });
  return taskId;
}

/** One trial on fresh processes; `streams` long generations, `queued` tasks (half batch then half interactive). */
export async function adoptionTrial(
  ctx: BenchContext,
  token: string,
  heartbeatMs: number,
  trial: number,
  streams: number,
  queued: number,
): Promise<AdoptionTrial> {
  const redis = await startRedisServer();
  const replicas: FileLoggedDaemon[] = [];
  const others: FileLoggedDaemon[] = [];
  let lb: NginxHop | undefined;
  const agent = new Agent({ connections: 4 * (streams + queued + 2) });
  try {
    for (const id of ['a', 'b', 'c']) {
      const port = await freeLoopbackPort();
      replicas.push(
        await startOrchestratord({
          paths: ctx.paths,
          dir: ctx.dir,
          token,
          heartbeatMs,
          name: `adopt-${trial}-replica-${id}`,
          env: {
            ORCHD_ADDR: `127.0.0.1:${port}`,
            ORCHD_ADVERTISE_URL: `http://127.0.0.1:${port}`,
            ORCHD_REDIS_URL: redis.url,
            ORCHD_REDIS_PREFIX: `adopt-${trial}:`,
            ORCHD_REPLICA_ID: `replica-${id}`,
          },
          nodeFlags: profFlags(ctx, `adopt-${trial}-replica-${id}`),
        }),
      );
    }
    const [victim] = replicas as [FileLoggedDaemon];
    lb = await startNginxHop(
      ensureNginx(ctx.log),
      ctx.dir,
      `adopt-${trial}`,
      replicas.map((r) => r.url),
      'keepalive',
    );
    const pm = await startPoolManagerd({
      paths: ctx.paths,
      dir: ctx.dir,
      nodeId: `adopt-${trial}-node`,
      token,
      orchestratorUrl: lb.url,
      heartbeatMs,
      pools: [
        { id: STREAM_POOL, model: ADOPT_MODEL, ctx: 4096 * streams, slots: streams, determinism: false, threads: 1 },
        { id: QUEUE_POOL, model: ADOPT_QUEUE_MODEL, ctx: 2048, slots: 1, determinism: true, threads: 1 },
      ],
    });
    others.push(pm.daemon);
    await waitPoolsReady(lb.url, token, [STREAM_POOL, QUEUE_POOL], [...replicas, pm.daemon], COLD_START_TIMEOUT_MS);

    let killAt = Number.POSITIVE_INFINITY;
    const giveUpAt = (): number => killAt + 20 * heartbeatMs;
    const follow = (taskId: string): Promise<FollowedTask> =>
      followTask({
        firstBase: victim.url,
        resumeBase: lb!.url,
        taskId,
        token,
        dispatcher: agent,
        retryMs: RETRY_MS,
        giveUpAt,
      });
    const pin = (pool: string) => ({ mode: 'pin', pin_pool_id: pool });
    const streamIds: string[] = [];
    for (let s = 0; s < streams; s++) {
      streamIds.push(
        await admit(victim.url, token, {
          model_ref: ADOPT_MODEL,
          prompt: `Tell a long story, number ${s}.`,
          max_tokens: 1500,
          sampling: { logit_bias: NO_EOS },
          placement: pin(STREAM_POOL),
        }),
      );
    }
    const streamFollows = streamIds.map(follow);
    // the queue pool's one slot, held by a /v1 stream through replica a (no resume in OpenAI's
    // protocol); `</s>` banned: the random synthetic model may end a generation at any token
    const blocker = request(`${victim.url}/v1/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        model: ADOPT_QUEUE_MODEL,
        prompt: 'Hold the slot with a long story.',
        max_tokens: 1500,
        logit_bias: NO_EOS,
        stream: true,
      }),
      dispatcher: agent,
    }).then(
      // read to the end (not `dump()`, which gives up after 128 KiB and so disconnects the client)
      async (r) => {
        try {
          for await (const chunk of r.body) void chunk;
        } catch {
          // replica a dies under it: that is the point
        }
      },
      () => undefined,
    );
    await sleep(500);
    const priorities = Array.from({ length: queued }, (_, q) => (q < queued / 2 ? 'batch' : 'interactive'));
    const queuedIds: string[] = [];
    for (const [q, priority] of priorities.entries()) {
      queuedIds.push(
        await admit(victim.url, token, {
          model_ref: ADOPT_QUEUE_MODEL,
          prompt: `Queued ${q}.`,
          max_tokens: 8,
          priority,
          placement: pin(QUEUE_POOL),
        }),
      );
    }
    const queuedFollows = queuedIds.map(follow);
    // mid-generation, at a random heartbeat phase
    await sleep(1000 + Math.random() * heartbeatMs);
    killAt = performance.now();
    const killEpoch = performance.timeOrigin + killAt;
    victim.signal('SIGKILL');
    const [streamRuns, queuedRuns] = await Promise.all([Promise.all(streamFollows), Promise.all(queuedFollows)]);
    await blocker;
    // when a survivor took each task: its `orphaned task adopted` line
    const adopted = new Map<string, { at: number; by: string }>();
    for (const [i, r] of replicas.entries()) {
      if (i === 0) continue;
      for (const l of r.logs()) {
        if (l.msg === 'orphaned task adopted' && typeof l.task_id === 'string' && typeof l.time === 'number')
          adopted.set(l.task_id, { at: l.time - killEpoch, by: r.name });
      }
    }
    const streamsOut = streamRuns.map((t) => {
      // the first token on a connection opened after the kill (frames already in flight on the first one do not count)
      const resumed = t.tokenConnection.findIndex((c) => c > 1);
      return {
        taskId: t.taskId,
        adoptedMs: adopted.get(t.taskId)?.at ?? Number.POSITIVE_INFINITY,
        resumedMs: resumed < 0 ? Number.POSITIVE_INFINITY : (t.tokenAt[resumed] as number) - killAt,
        ...indexFaults(t.indices),
        ends: t.terminals.filter((x) => x.event === 'end').length,
        errors: t.terminals.filter((x) => x.event === 'error').map((x) => x.code ?? 'error'),
        connections: t.connections,
        tokens: t.indices.length,
        refusals: t.refusals.slice(0, 5),
      };
    });
    const queuedOut = queuedRuns.map((t, q) => ({
      taskId: t.taskId,
      priority: priorities[q] as string,
      admittedIndex: q,
      adoptedMs: adopted.get(t.taskId)?.at ?? Number.POSITIVE_INFINITY,
      adoptedBy: adopted.get(t.taskId)?.by,
      startMs: (t.tokenAt[0] ?? Number.POSITIVE_INFINITY) - killAt,
      // > 0: it was not queued when replica a died (the trial's premise failed)
      tokensBeforeKill: t.tokenAt.filter((at) => at <= killAt).length,
      ends: t.terminals.filter((x) => x.event === 'end').length,
      errors: t.terminals.filter((x) => x.event === 'error').map((x) => x.code ?? 'error'),
    }));
    const startOrder = [...queuedOut]
      .filter((q) => Number.isFinite(q.startMs))
      .sort((x, y) => x.startMs - y.startMs)
      .map((q) => q.admittedIndex);
    const expectedOrder = [...queuedOut]
      .sort((x, y) =>
        x.priority === y.priority ? x.admittedIndex - y.admittedIndex : x.priority === 'interactive' ? -1 : 1,
      )
      .map((q) => q.admittedIndex);
    if (streamsOut.every((s) => s.tokens === 0))
      throw new BenchError(`adoption trial ${trial}: no stream received a token (see ${ctx.dir})`);
    return {
      streams: streamsOut,
      queued: queuedOut,
      startOrder,
      expectedOrder,
      tokensBeforeKill: streamRuns.map((t) => t.tokenAt.filter((at) => at <= killAt).length),
    };
  } finally {
    await agent.close();
    for (const d of others) await d.stop();
    for (const r of replicas) await r.stop();
    await lb?.stop();
    await redis.stop();
  }
}
