import type { FileLoggedDaemon } from '@llama-orch/daemon-support/daemon-launcher';
import { BenchError } from '../errors.js';
import { startOrchestratord, waitPoolsReady } from './cluster.js';
import { profFlags, type BenchContext } from './context.js';
import { createCpuCap, type CpuCap } from './cpu-cap.js';
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
  /**
   * Also measure replica A alone in its cluster while a twin (replica C: a cluster of its own, own
   * FIXTURE node, cap and balancer) relays the same load beside it: the machine as busy as with 2
   * replicas, without the second replica sharing A's cluster. Tells the cluster's cost from the
   * machine's contention.
   */
  readonly twin: boolean;
}

export interface ScaleSample {
  readonly replicas: 1 | 2;
  /** Replica A alone in its cluster, its twin loaded beside it (figures are A's alone). */
  readonly twin: boolean;
  /** The twin's tokens/s in the same window (twin samples). */
  readonly twinTokensPerS?: number;
  readonly round: number;
  readonly tokensPerS: number;
  readonly tokens: number;
  readonly seconds: number;
  /** CPU of each replica in the window ÷ the window ÷ the cap: 1.0 = the cap is the bottleneck. */
  readonly capUse: number[];
  readonly cpuUsPerToken: number;
  /**
   * 1-replica rounds: CPU of replica B in the window, cores. B is in A's cluster but gets no load:
   * what a replica spends hearing another's traffic (its lease and queue signals).
   */
  readonly idlePeerCores?: number;
  /** CPU of the balancer in front (master and workers) over the settle and window, cores. */
  readonly lbCores: number;
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

/** Runs the scale rounds; every process it starts is stopped and its cgroups removed before it returns. */
export async function scaleCurve(
  ctx: BenchContext,
  token: string,
  redisUrl: string,
  sizes: ScaleSizes,
): Promise<ScaleRun> {
  const nginxBin = ensureNginx(ctx.log);
  const caps: CpuCap[] = [];
  const replicas: FileLoggedDaemon[] = [];
  const lbs: NginxHop[] = [];
  const fixtures: FileLoggedDaemon[] = [];
  const ids = sizes.twin ? ['a', 'b', 'c'] : ['a', 'b'];
  try {
    for (const id of ids) caps.push(await createCpuCap(`llorch-bench-${process.pid}-replica-${id}`, sizes.capCores));
    const started = await Promise.allSettled(
      ids.map((id) =>
        startOrchestratord({
          paths: ctx.paths,
          dir: ctx.dir,
          token,
          heartbeatMs: HEARTBEAT_MS,
          name: `replica-${id}`,
          // Replica c (the twin) is a cluster of its own: another key prefix, nothing shared with a and b.
          env: {
            ORCHD_REDIS_URL: redisUrl,
            ORCHD_REDIS_PREFIX: id === 'c' ? 'twin:' : 'scale:',
            ORCHD_REPLICA_ID: `replica-${id}`,
          },
          nodeFlags: profFlags(ctx, `replicas-scale-${id}`),
        }),
      ),
    );
    for (const s of started) if (s.status === 'fulfilled') replicas.push(s.value);
    for (const s of started) if (s.status === 'rejected') throw s.reason;
    // Started outside the caps (start-up is not what is measured), then moved under them.
    for (const [i, r] of replicas.entries()) await caps[i]?.add(r.pid);
    const [a, b, c] = replicas as [FileLoggedDaemon, FileLoggedDaemon, FileLoggedDaemon | undefined];
    lbs.push(await startNginxHop(nginxBin, ctx.dir, 'lb-1', [a.url], 'keepalive'));
    lbs.push(await startNginxHop(nginxBin, ctx.dir, 'lb-2', [a.url, b.url], 'keepalive'));
    const [lb1, lb2] = lbs as [NginxHop, NginxHop];
    const lbTwin =
      c === undefined ? undefined : await startNginxHop(nginxBin, ctx.dir, 'lb-twin', [c.url], 'keepalive');
    if (lbTwin !== undefined) lbs.push(lbTwin);
    // The FIXTURE nodes register and heartbeat through the balancer, as pool-managerd would.
    const nodes = 4;
    const poolIds = (prefix: string): string[] => Array.from({ length: nodes }, (_, i) => `${prefix}-${i}`);
    for (const [prefix, lb] of lbTwin === undefined
      ? [['scale', lb2] as const]
      : ([['scale', lb2] as const, ['twin', lbTwin] as const] as const)) {
      fixtures.push(
        await startFixtureNode(ctx.paths, ctx.dir, {
          orchestratorUrl: lb.url,
          token,
          nodes,
          slotsPerPool: 64,
          model: SCALE_MODEL,
          mode: 'stream',
          tokenIntervalMs: sizes.tokenIntervalMs,
          heartbeatMs: HEARTBEAT_MS,
          idPrefix: prefix,
        }),
      );
    }
    for (const r of [a, b]) await waitPoolsReady(r.url, token, poolIds('scale'), [...replicas, ...fixtures], 30_000);
    if (c !== undefined) await waitPoolsReady(c.url, token, poolIds('twin'), [...replicas, ...fixtures], 30_000);

    if (sizes.warmupS > 0) {
      ctx.log(`replicas: scale warm-up, ${sizes.warmupS} s on both replicas`);
      const load = { ...sizes.loadPerReplica, clients: sizes.loadPerReplica.clients * 2 };
      await relayLoopWindow({
        clientScript: ctx.paths.streamClient,
        url: lb2.url,
        token,
        load,
        settleS: 1,
        windowS: sizes.warmupS,
        pids: [],
      });
      await new Promise((r) => setTimeout(r, 1000));
    }
    const samples: ScaleSample[] = [];
    const one = async (n: 1 | 2, round: number, twin = false): Promise<void> => {
      const watched = n === 1 ? [a] : [a, b];
      const before = await Promise.all(caps.slice(0, n).map((cap) => cap.stats()));
      const window = (url: string, clients: number, pids: number[]): ReturnType<typeof relayLoopWindow> =>
        relayLoopWindow({
          clientScript: ctx.paths.streamClient,
          url,
          token,
          load: { ...sizes.loadPerReplica, clients },
          settleS: sizes.settleS,
          windowS: sizes.windowS,
          pids,
        });
      const perReplica = sizes.loadPerReplica.clients;
      const lb = n === 1 ? lb1 : lb2;
      const lbCpu0 = lb.cpuSeconds();
      const [w, tw] = await Promise.all([
        window(
          lb.url,
          perReplica * n,
          // In 1-replica rounds B is watched too (last): idle in the cluster, it hears A's signals.
          [...watched, ...(n === 1 ? [b] : [])].map((r) => r.pid),
        ),
        twin && lbTwin !== undefined && c !== undefined ? window(lbTwin.url, perReplica, [c.pid]) : undefined,
      ]);
      const lbCores = (lb.cpuSeconds() - lbCpu0) / (sizes.settleS + w.seconds);
      const after = await Promise.all(caps.slice(0, n).map((cap) => cap.stats()));
      if (w.tokens === 0)
        throw new BenchError(`scale: no token relayed by ${n} replica(s) (${JSON.stringify(w.terminal)})`);
      const cpuS = w.cpuS.slice(0, n);
      const cpu = cpuS.reduce((x, y) => x + y, 0);
      const idlePeer = n === 1 ? w.cpuS[1] : undefined;
      samples.push({
        replicas: n,
        twin,
        ...(tw !== undefined ? { twinTokensPerS: tw.tokens / tw.seconds } : {}),
        round,
        tokensPerS: w.tokens / w.seconds,
        tokens: w.tokens,
        seconds: w.seconds,
        capUse: cpuS.map((s) => s / w.seconds / sizes.capCores),
        cpuUsPerToken: (cpu * 1e6) / w.tokens,
        ...(idlePeer !== undefined ? { idlePeerCores: idlePeer / w.seconds } : {}),
        lbCores,
        throttledPeriods: after.map((s, i) => s.throttled - (before[i]?.throttled ?? 0)),
        delayP50Ms: w.delayP50Ms,
        delayP99Ms: w.delayP99Ms,
        errored: w.errored,
        terminal: w.terminal,
      });
      ctx.log(
        `replicas: scale round ${round} ${n} replica(s)${twin ? ' beside its twin' : ''}: ${Math.round(w.tokens / w.seconds)} tokens/s, cap use ${cpuS.map((s) => (s / w.seconds / sizes.capCores).toFixed(2)).join('/')}, delivery p50 ${w.delayP50Ms.toFixed(1)} ms, nginx ${lbCores.toFixed(2)} core${idlePeer !== undefined ? `, idle replica B ${((idlePeer / w.seconds) * 1000).toFixed(1)} ms CPU/s` : ''}`,
      );
      // Let the cancelled tasks of this round end before the next one starts.
      await new Promise((r) => setTimeout(r, 1000));
    };
    for (let round = 0; round < sizes.rounds; round++) {
      const modes: Array<[1 | 2, boolean]> = [
        [1, false],
        [2, false],
        ...(sizes.twin ? [[1, true] as [1, boolean]] : []),
      ];
      for (const [n, twin] of round % 2 === 0 ? modes : [...modes].reverse()) await one(n, round, twin);
    }
    return { samples, mechanism: caps[0]?.mechanism ?? '', nginx: nginxVersion(nginxBin) };
  } finally {
    for (const f of fixtures) await f.stop();
    for (const lb of lbs) await lb.stop();
    for (const r of replicas) await r.stop();
    for (const c of caps) await c.remove();
  }
}
