/**
 * The fleets of `pnpm bench prefix`: per variant its own orchestratord (or three replicas on one
 * redis-server behind nginx) and its own pool-managerd nodes, so one variant's traffic never warms
 * another's engine caches.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { freeLoopbackPort } from '@llama-orch/daemon-support';
import type { FileLoggedDaemon } from '@llama-orch/daemon-support/daemon-launcher';
import { BenchError } from '../errors.js';
import { MODEL } from './chat-conversation.js';
import { startOrchestratord, startPoolManagerd, waitNodeIdle, type PoolManagerdHandle } from './cluster.js';
import { profFlags, type BenchContext } from './context.js';
import { startNginxHop, type NginxHop } from './nginx.js';
import { cpuSeconds } from './proc.js';
import type { PrefixVariant } from './prefix-workload.js';

export const HEARTBEAT_MS = 1000;

/** What each variant runs: the placement strategy, whether requests carry `user`, how many replicas. */
export const VARIANT_SPEC: Readonly<
  Record<PrefixVariant, { strategy: 'least-loaded' | 'cache-aware'; user: boolean; replicas: number; tag: string }>
> = {
  'least-loaded': { strategy: 'least-loaded', user: false, replicas: 1, tag: 'll' },
  affinity: { strategy: 'least-loaded', user: true, replicas: 1, tag: 'af' },
  'cache-aware': { strategy: 'cache-aware', user: false, replicas: 1, tag: 'ca' },
  'cache-aware-3r': { strategy: 'cache-aware', user: false, replicas: 3, tag: 'c3' },
};

export interface FleetOptions {
  ctx: BenchContext;
  token: string;
  variant: PrefixVariant;
  nodes: number;
  /** llama-server `--cache-ram` of every engine, MiB. */
  cacheRamMiB: number;
  /** Three replicas need both. */
  redisUrl?: string;
  nginxBin?: string;
}

export interface Fleet {
  readonly variant: PrefixVariant;
  /** Where clients and nodes talk: the orchestratord, or nginx in front of the replicas. */
  readonly url: string;
  readonly orchestrators: readonly FileLoggedDaemon[];
  readonly replicaNames: readonly string[];
  readonly nodes: readonly PoolManagerdHandle[];
  readonly poolIds: readonly string[];
  readonly lb?: NginxHop | undefined;
}

export async function startFleet(o: FleetOptions): Promise<Fleet> {
  const spec = VARIANT_SPEC[o.variant];
  const name = `prefix-${spec.tag}`;
  const env = { ORCHESTRATORD_PLACEMENT_STRATEGY: spec.strategy };
  const orchestrators: FileLoggedDaemon[] = [];
  const replicaNames: string[] = [];
  let lb: NginxHop | undefined;
  if (spec.replicas === 1) {
    orchestrators.push(
      await startOrchestratord({
        paths: o.ctx.paths,
        dir: o.ctx.dir,
        token: o.token,
        heartbeatMs: HEARTBEAT_MS,
        name,
        env,
        nodeFlags: profFlags(o.ctx, name),
      }),
    );
    replicaNames.push('single');
  } else {
    if (o.redisUrl === undefined || o.nginxBin === undefined)
      throw new BenchError(`${o.variant}: replicas need a redis-server and nginx`);
    for (let i = 1; i <= spec.replicas; i++) {
      const port = await freeLoopbackPort();
      orchestrators.push(
        await startOrchestratord({
          paths: o.ctx.paths,
          dir: o.ctx.dir,
          token: o.token,
          heartbeatMs: HEARTBEAT_MS,
          name: `${name}-r${i}`,
          env: {
            ...env,
            ORCHD_ADDR: `127.0.0.1:${port}`,
            ORCHD_ADVERTISE_URL: `http://127.0.0.1:${port}`,
            ORCHD_REDIS_URL: o.redisUrl,
            ORCHD_REDIS_PREFIX: `${name}:`,
            ORCHD_REPLICA_ID: `r${i}`,
          },
          nodeFlags: profFlags(o.ctx, `${name}-r${i}`),
        }),
      );
      replicaNames.push(`r${i}`);
    }
    lb = await startNginxHop(
      o.nginxBin,
      o.ctx.dir,
      `${name}-lb`,
      orchestrators.map((d) => d.url),
      'keepalive',
    );
  }
  const url = lb?.url ?? (orchestrators[0] as FileLoggedDaemon).url;
  const poolIds = Array.from({ length: o.nodes }, (_, i) => `${spec.tag}${i + 1}`);
  // determinism off: the strict profile bypasses the prompt cache, which is what is measured here.
  // Nodes register and heartbeat through the balancer on the replicated side, like the clients.
  const nodes = await Promise.all(
    poolIds.map((id, i) =>
      startPoolManagerd({
        paths: o.ctx.paths,
        dir: o.ctx.dir,
        nodeId: `${name}-node-${i + 1}`,
        token: o.token,
        orchestratorUrl: url,
        heartbeatMs: HEARTBEAT_MS,
        pools: [
          {
            id,
            model: MODEL,
            ctx: 4096,
            slots: 1,
            determinism: false,
            threads: 1,
            extraFlags: ['--cache-ram', String(o.cacheRamMiB)],
          },
        ],
        nodeFlags: profFlags(o.ctx, `${name}-node-${i + 1}`),
      }),
    ),
  );
  return { variant: o.variant, url, orchestrators, replicaNames, nodes, poolIds, lb };
}

export async function stopFleet(f: Fleet): Promise<void> {
  await Promise.all(f.nodes.map((n) => n.daemon.stop()));
  for (const d of f.orchestrators) await d.stop();
  await f.lb?.stop();
}

export async function waitFleetIdle(f: Fleet, token: string): Promise<void> {
  for (const n of f.nodes) await waitNodeIdle(f.url, token, n.nodeId, 30_000);
}

/** Engines a node spawned and still runs (`<runtime_dir>/pids/<pool>-<replica>.pid`). */
function enginePids(node: PoolManagerdHandle): number[] {
  const dir = join(node.runtimeDir, 'pids');
  try {
    return readdirSync(dir)
      .filter((f) => f.endsWith('.pid'))
      .map((f) => Number(readFileSync(join(dir, f), 'utf8').trim()))
      .filter((p) => Number.isInteger(p) && p > 0);
  } catch {
    return [];
  }
}

/** CPU seconds used so far by every process of the fleet (daemons, engines, nginx). */
export function fleetCpuSeconds(f: Fleet): number {
  const pids = [...f.orchestrators.map((d) => d.pid), ...f.nodes.flatMap((n) => [n.daemon.pid, ...enginePids(n)])];
  let s = 0;
  for (const p of pids) {
    try {
      s += cpuSeconds(p);
    } catch {
      // exited: its time is gone with it
    }
  }
  return s + (f.lb?.cpuSeconds() ?? 0);
}

/** Where each task went: orchestratord's `task placed` line with the request's correlation id, and the replica that wrote it. */
export function placements(f: Fleet): Map<string, { pool: string; replica: string; reason: string }> {
  const out = new Map<string, { pool: string; replica: string; reason: string }>();
  f.orchestrators.forEach((d, i) => {
    for (const l of d.logs()) {
      if (l.msg === 'task placed' && typeof l.correlation_id === 'string' && typeof l.pool_id === 'string')
        out.set(l.correlation_id, {
          pool: l.pool_id,
          replica: f.replicaNames[i] as string,
          reason: typeof l.reason === 'string' ? l.reason : 'unknown',
        });
    }
  });
  return out;
}
