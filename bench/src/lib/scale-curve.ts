import { BenchError } from '../errors.js';
import { startOrchestratord, waitPoolsReady } from './cluster.js';
import { profFlags, type BenchContext } from './context.js';
import { createCpuCap, type CpuCap } from './cpu-cap.js';
import type { Daemon } from './daemon.js';
import { startFixtureNode } from './fixture.js';
import { ensureNginx, nginxVersion, startNginxHop, type NginxHop } from './nginx.js';
import { relayLoopWindow, type RelayLoopLoad } from './relay-loop.js';
import { HEARTBEAT_MS } from './store-compare.js';

/**
 * Part 2 of the replicas benchmark: tokens/s relayed by 1 and by 2 orchestratord replicas (Redis
 * store), each replica in a cgroup of its own capped at the same CPU quota, behind nginx as the
 * load balancer; FIXTURE nodes, nginx, redis-server and the load generator run outside the caps.
 * Both replicas run throughout; a round points the load at the 1-replica balancer or at the
 * 2-replica one, alternating which goes first.
 */

export const SCALE_MODEL = 'fixture:scale';

export interface ScaleSizes {
  /** CPU quota of each replica, cores. */
  readonly capCores: number;
  /**
   * The load each replica gets: with 2 replicas, twice the clients (the same overload per replica,
   * so a replica that scales relays what it relayed alone).
   */
  readonly loadPerReplica: RelayLoopLoad;
  readonly tokenIntervalMs: number;
  readonly settleS: number;
  readonly windowS: number;
  readonly rounds: number;
  /** A window on both replicas before the rounds, not kept (JIT, connections); 0 = none. */
  readonly warmupS: number;
}

export interface ScaleSample {
  readonly replicas: 1 | 2;
  readonly round: number;
  readonly tokensPerS: number;
  readonly tokens: number;
  readonly seconds: number;
  /** CPU of each replica in the window ÷ the window ÷ the cap: 1.0 = the cap is the bottleneck. */
  readonly capUse: number[];
  readonly cpuUsPerToken: number;
  readonly throttledPeriods: number[];
  readonly delayP50Ms: number;
  readonly delayP99Ms: number;
  readonly errored: number;
  readonly terminal: Record<string, number>;
}

export interface ScaleRun {
  readonly samples: ScaleSample[];
  readonly mechanism: string;
  readonly nginx: string;
}

/** Runs the scale rounds; every process it starts is stopped and both cgroups removed before it returns. */
export async function scaleCurve(ctx: BenchContext, token: string, redisUrl: string, sizes: ScaleSizes): Promise<ScaleRun> {
  const nginxBin = ensureNginx(ctx.log);
  const caps: CpuCap[] = [];
  const replicas: Daemon[] = [];
  const lbs: NginxHop[] = [];
  let fixture: Daemon | undefined;
  try {
    for (const id of ['a', 'b']) caps.push(await createCpuCap(`llorch-bench-${process.pid}-replica-${id}`, sizes.capCores));
    const started = await Promise.allSettled(
      ['a', 'b'].map((id) =>
        startOrchestratord({
          paths: ctx.paths,
          dir: ctx.dir,
          token,
          heartbeatMs: HEARTBEAT_MS,
          name: `replica-${id}`,
          env: { ORCHD_REDIS_URL: redisUrl, ORCHD_REDIS_PREFIX: 'scale:', ORCHD_REPLICA_ID: `replica-${id}` },
          nodeFlags: profFlags(ctx, `replicas-scale-${id}`),
        }),
      ),
    );
    for (const s of started) if (s.status === 'fulfilled') replicas.push(s.value);
    for (const s of started) if (s.status === 'rejected') throw s.reason;
    // Started outside the caps (start-up is not what is measured), then moved under them.
    for (const [i, r] of replicas.entries()) await caps[i]?.add(r.pid);
    const [a, b] = replicas as [Daemon, Daemon];
    lbs.push(await startNginxHop(nginxBin, ctx.dir, 'lb-1', [a.url], 'keepalive'));
    lbs.push(await startNginxHop(nginxBin, ctx.dir, 'lb-2', [a.url, b.url], 'keepalive'));
    const [lb1, lb2] = lbs as [NginxHop, NginxHop];
    // The FIXTURE nodes register and heartbeat through the 2-replica balancer, as pool-managerd would.
    const nodes = 4;
    fixture = await startFixtureNode(ctx.paths, ctx.dir, {
      orchestratorUrl: lb2.url,
      token,
      nodes,
      slotsPerPool: 64,
      model: SCALE_MODEL,
      mode: 'stream',
      tokenIntervalMs: sizes.tokenIntervalMs,
      heartbeatMs: HEARTBEAT_MS,
      idPrefix: 'scale',
    });
    const poolIds = Array.from({ length: nodes }, (_, i) => `scale-${i}`);
    for (const r of replicas) await waitPoolsReady(r.url, token, poolIds, [...replicas, fixture], 30_000);

    if (sizes.warmupS > 0) {
      ctx.log(`replicas: scale warm-up, ${sizes.warmupS} s on both replicas`);
      const load = { ...sizes.loadPerReplica, clients: sizes.loadPerReplica.clients * 2 };
      await relayLoopWindow({ clientScript: ctx.paths.streamClient, url: lb2.url, token, load, settleS: 1, windowS: sizes.warmupS, pids: [] });
      await new Promise((r) => setTimeout(r, 1000));
    }
    const samples: ScaleSample[] = [];
    const one = async (n: 1 | 2, round: number): Promise<void> => {
      const watched = n === 1 ? [a] : [a, b];
      const before = await Promise.all(caps.slice(0, n).map((c) => c.stats()));
      const w = await relayLoopWindow({
        clientScript: ctx.paths.streamClient,
        url: n === 1 ? lb1.url : lb2.url,
        token,
        load: { ...sizes.loadPerReplica, clients: sizes.loadPerReplica.clients * n },
        settleS: sizes.settleS,
        windowS: sizes.windowS,
        pids: watched.map((r) => r.pid),
      });
      const after = await Promise.all(caps.slice(0, n).map((c) => c.stats()));
      if (w.tokens === 0) throw new BenchError(`scale: no token relayed by ${n} replica(s) (${JSON.stringify(w.terminal)})`);
      const cpu = w.cpuS.reduce((x, y) => x + y, 0);
      samples.push({
        replicas: n,
        round,
        tokensPerS: w.tokens / w.seconds,
        tokens: w.tokens,
        seconds: w.seconds,
        capUse: w.cpuS.map((s) => s / w.seconds / sizes.capCores),
        cpuUsPerToken: (cpu * 1e6) / w.tokens,
        throttledPeriods: after.map((s, i) => s.throttled - (before[i]?.throttled ?? 0)),
        delayP50Ms: w.delayP50Ms,
        delayP99Ms: w.delayP99Ms,
        errored: w.errored,
        terminal: w.terminal,
      });
      ctx.log(
        `replicas: scale round ${round} ${n} replica(s): ${Math.round(w.tokens / w.seconds)} tokens/s, cap use ${w.cpuS.map((s) => (s / w.seconds / sizes.capCores).toFixed(2)).join('/')}, delivery p50 ${w.delayP50Ms.toFixed(1)} ms`,
      );
      // Let the cancelled tasks of this round end before the next one starts.
      await new Promise((r) => setTimeout(r, 1000));
    };
    for (let round = 0; round < sizes.rounds; round++) {
      for (const n of round % 2 === 0 ? ([1, 2] as const) : ([2, 1] as const)) await one(n, round);
    }
    return { samples, mechanism: caps[0]?.mechanism ?? '', nginx: nginxVersion(nginxBin) };
  } finally {
    await fixture?.stop();
    for (const lb of lbs) await lb.stop();
    for (const r of replicas) await r.stop();
    for (const c of caps) await c.remove();
  }
}
