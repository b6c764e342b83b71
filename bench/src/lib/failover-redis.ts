import { setTimeout as sleep } from 'node:timers/promises';
import { startRedisServer, type RedisServerHandle } from '@llama-orch/daemon-support/redis-server';
import { Agent, request } from 'undici';
import type { FileLoggedDaemon } from '@llama-orch/daemon-support/daemon-launcher';
import { startOrchestratord, waitPoolsReady } from './cluster.js';
import { profFlags, type BenchContext } from './context.js';
import { startFixtureNode } from './fixture.js';

/**
 * The failover benchmark's Redis outage trial: two orchestratord replicas on one redis-server,
 * a FIXTURE node, client loops admitting tasks on both replicas; redis-server is SIGKILLed and
 * every admission answer after the kill is timed. Then redis-server comes back empty on its port
 * and the time to the next 202 is taken (nodes re-register on their next heartbeat).
 */

const MODEL = 'fixture:stream';
/** Concurrent admission loops (half on each replica). */
const LOOPS = 4;
/** An admission unanswered this long after the kill is a hang. */
export const HANG_MS = 1000;
/** A request still unanswered after this is abandoned (and counted as a hang). */
const REQUEST_LIMIT_MS = 5000;

interface Answer {
  sentAt: number;
  at: number;
  status: number;
  code: string | undefined;
  retryAfter: string | undefined;
  replica: string;
}

export interface RedisOutageTrial {
  /** Kill → first 503 STORE_UNAVAILABLE with Retry-After, ms (NaN: none). */
  firstTypedMs: number;
  /** That answer's Retry-After header. */
  retryAfter: string | undefined;
  /** Kill → first typed 503 from each replica, ms. */
  firstTypedByReplicaMs: Record<string, number>;
  /** Kill → /readyz of replica a answered not ready, ms (polled every 20 ms). */
  notReadyMs: number;
  /** The longest wait of an admission answered after the kill, counted from the later of its send and the kill, ms. */
  longestWaitAfterKillMs: number;
  /** Admissions that waited longer than {@link HANG_MS} after the kill (or never answered). */
  hangs: number;
  /** Answers after the kill by `status code`. */
  afterKill: Record<string, number>;
  /** 202s before the kill (the loops were admitting). */
  admittedBefore: number;
  /** redis-server back (empty) → first 202 again, ms (NaN: none within the wait). */
  resumedMs: number;
}

async function admitOnce(url: string, token: string, agent: Agent): Promise<Omit<Answer, 'replica'>> {
  const sentAt = performance.now();
  try {
    const res = await request(`${url}/v2/tasks`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json' },
      body: JSON.stringify({ model_ref: MODEL, prompt: 'Redis outage probe.', max_tokens: 2 }),
      dispatcher: agent,
      signal: AbortSignal.timeout(REQUEST_LIMIT_MS),
    });
    const text = await res.body.text();
    const at = performance.now();
    let code: string | undefined;
    try {
      code = (JSON.parse(text) as { code?: string }).code;
    } catch {
      code = undefined;
    }
    const ra = res.headers['retry-after'];
    return { sentAt, at, status: res.statusCode, code, retryAfter: typeof ra === 'string' ? ra : undefined };
  } catch (err) {
    return { sentAt, at: performance.now(), status: 0, code: (err as Error).name, retryAfter: undefined };
  }
}

async function readyzDown(url: string, since: number, until: () => boolean): Promise<number> {
  while (!until()) {
    const status = await request(`${url}/readyz`, { signal: AbortSignal.timeout(REQUEST_LIMIT_MS) }).then(
      async (r) => {
        await r.body.dump();
        return r.statusCode;
      },
      () => 0,
    );
    if (status !== 200) return performance.now() - since;
    await sleep(20);
  }
  return Number.NaN;
}

/** One trial on fresh processes: redis-server, replicas a and b, a FIXTURE node registered with a. */
export async function redisOutageTrial(
  ctx: BenchContext,
  token: string,
  heartbeatMs: number,
  trial: number,
): Promise<RedisOutageTrial> {
  const redis: RedisServerHandle = await startRedisServer();
  const daemons: FileLoggedDaemon[] = [];
  const agent = new Agent({ connections: LOOPS });
  try {
    const prefix = `outage-${trial}:`;
    for (const id of ['a', 'b']) {
      daemons.push(
        await startOrchestratord({
          paths: ctx.paths,
          dir: ctx.dir,
          token,
          heartbeatMs,
          name: `outage-${trial}-replica-${id}`,
          env: { ORCHD_REDIS_URL: redis.url, ORCHD_REDIS_PREFIX: prefix, ORCHD_REPLICA_ID: `replica-${id}` },
          nodeFlags: profFlags(ctx, `outage-${trial}-replica-${id}`),
        }),
      );
    }
    const replicas = daemons.slice();
    const [a, b] = replicas as [FileLoggedDaemon, FileLoggedDaemon];
    daemons.push(
      await startFixtureNode(ctx.paths, ctx.dir, {
        orchestratorUrl: a.url,
        token,
        nodes: 1,
        slotsPerPool: 64,
        model: MODEL,
        mode: 'stream',
        tokenIntervalMs: 2,
        heartbeatMs,
        idPrefix: `outage-${trial}`,
      }),
    );
    // replica b sees the node that registered with a: the registry is shared
    await waitPoolsReady(b.url, token, [`outage-${trial}-0`], daemons, 30_000);
    const answers: Answer[] = [];
    let running = true;
    const loops = Array.from({ length: LOOPS }, async (_, i) => {
      const r = i % 2 === 0 ? a : b;
      const name = i % 2 === 0 ? 'replica-a' : 'replica-b';
      while (running) {
        const ans = await admitOnce(r.url, token, agent);
        answers.push({ ...ans, replica: name });
        // a refused admission is retried after a short pause, as a client honouring Retry-After would not: this probes at 20 ms
        if (ans.status !== 202) await sleep(20);
      }
    });
    await sleep(1000 + Math.random() * heartbeatMs);
    const killAt = performance.now();
    let stopReadyz = false;
    const notReady = readyzDown(a.url, killAt, () => stopReadyz);
    await redis.kill();
    await sleep(2000);
    stopReadyz = true;
    const restartAt = performance.now();
    await redis.restart();
    let resumedAt = Number.NaN;
    const resumeLimit = performance.now() + 10 * heartbeatMs;
    while (performance.now() < resumeLimit) {
      const first = answers.find((x) => x.at > restartAt && x.status === 202);
      if (first !== undefined) {
        resumedAt = first.at;
        break;
      }
      await sleep(20);
    }
    running = false;
    await Promise.all(loops);
    // every answer to a request sent before redis-server came back, including one held past that
    const after = answers.filter((x) => x.at > killAt && x.sentAt < restartAt);
    const typed = after.filter((x) => x.status === 503 && x.code === 'STORE_UNAVAILABLE' && x.retryAfter !== undefined);
    const firstTyped = typed[0];
    const byReplica: Record<string, number> = {};
    for (const t of typed) byReplica[t.replica] ??= t.at - killAt;
    const waits = after.map((x) => x.at - Math.max(x.sentAt, killAt));
    const afterKill: Record<string, number> = {};
    for (const x of after) {
      const k = `${x.status} ${x.code ?? ''}`.trim();
      afterKill[k] = (afterKill[k] ?? 0) + 1;
    }
    return {
      firstTypedMs: firstTyped === undefined ? Number.NaN : firstTyped.at - killAt,
      retryAfter: firstTyped?.retryAfter,
      firstTypedByReplicaMs: byReplica,
      notReadyMs: await notReady,
      longestWaitAfterKillMs: waits.length === 0 ? Number.NaN : Math.max(...waits),
      // an abandoned request (status 0 after REQUEST_LIMIT_MS) waited past HANG_MS too
      hangs: waits.filter((w) => w > HANG_MS).length,
      afterKill,
      admittedBefore: answers.filter((x) => x.at < killAt && x.status === 202).length,
      resumedMs: resumedAt - restartAt,
    };
  } finally {
    await agent.close();
    for (const d of daemons.reverse()) await d.stop();
    await redis.stop();
  }
}
