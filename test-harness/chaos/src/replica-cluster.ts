import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { request } from 'undici';
import {
  launchDaemon,
  type CapturedDaemon,
  type CapturedLine,
  type DaemonExit,
  type DaemonSpec,
} from '@llama-orch/daemon-support/daemon-launcher';
import { startBalancer, type Balancer } from './balancer.js';
import {
  fetchNodePools,
  readHandoffs,
  startChaosNode,
  type ChaosNode,
  type HandoffInfo,
  type NodePool,
} from './chaos-node.js';
import { appMain, newToken } from './chaos-paths.js';
import { startRedis, type RedisDaemon } from './redis-daemon.js';

export interface ReplicaClusterOptions {
  replicas: number;
  nodes: number;
  slots: number;
  /** Node heartbeat interval = the replicas' (owner lease: 2 intervals). */
  heartbeatMs: number;
  ctx?: number;
  threads?: number;
  logLevel?: string;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const a = s.address();
      s.close(() => (typeof a === 'object' && a !== null ? resolve(a.port) : reject(new Error('no port'))));
    });
  });
}

/** One replica slot: its id and port stay, its process generations change. */
export interface ReplicaSlot {
  id: string;
  port: number;
  generations: CapturedDaemon[];
}

/**
 * N orchestratord replicas on one real redis-server (AOF everysec in its own dir), HAProxy in front
 * (clients and pool-managerds use its address, as with `llorch up --replicas`), and pool-managerd
 * nodes with real llama-servers. A replica SIGKILLed is restarted on its port with its id (what
 * `llorch up`'s supervision does); redis-server SIGKILLed is restarted on its port and dir.
 */
export class ReplicaCluster {
  readonly token = newToken('chaos-token');
  readonly nodes: ChaosNode[] = [];
  readonly replicas: ReplicaSlot[] = [];
  readonly redisGenerations: RedisDaemon[] = [];
  readonly marker: string;
  balancer: Balancer | undefined;

  private constructor(
    readonly workDir: string,
    readonly redisPort: number,
    readonly opts: ReplicaClusterOptions,
  ) {
    this.marker = `LLORCH_CHAOS_RUN=${workDir}`;
  }

  static async start(opts: ReplicaClusterOptions): Promise<ReplicaCluster> {
    const workDir = await mkdtemp(join(tmpdir(), 'llorch-chaos-replicas-'));
    const c = new ReplicaCluster(workDir, await freePort(), opts);
    try {
      await mkdir(c.redisDir, { recursive: true, mode: 0o700 });
      c.redisGenerations.push(await startRedis(c.redisPort, c.redisDir));
      for (let i = 1; i <= opts.replicas; i++)
        c.replicas.push({ id: `r${i}`, port: await freePort(), generations: [] });
      for (const r of c.replicas) r.generations.push(await c.#startReplica(r));
      c.balancer = await startBalancer(
        await freePort(),
        c.replicas.map((r) => r.port),
        workDir,
        Math.max(100, Math.floor(opts.heartbeatMs / 2)),
      );
      for (let n = 1; n <= opts.nodes; n++) {
        c.nodes.push(await startChaosNode({ ...opts, n, workDir, token: c.token, orchestratorUrl: c.url }));
      }
      await c.waitPoolsReady(30 * 60_000);
      return c;
    } catch (err) {
      await c.close();
      throw err;
    }
  }

  get redisDir(): string {
    return join(this.workDir, 'redis');
  }

  get redis(): RedisDaemon {
    return this.redisGenerations.at(-1) as RedisDaemon;
  }

  /** The balancer: where clients and nodes send everything. */
  get url(): string {
    if (this.balancer === undefined) throw new Error('no balancer yet');
    return this.balancer.url;
  }

  get auth(): Record<string, string> {
    return { authorization: `Bearer ${this.token}` };
  }

  replicaUrl(r: ReplicaSlot): string {
    return `http://127.0.0.1:${r.port}`;
  }

  async #startReplica(r: ReplicaSlot): Promise<CapturedDaemon> {
    const spec: DaemonSpec<'capture'> = {
      name: `orchestratord:${r.id}#${r.generations.length}`,
      output: 'capture',
      script: appMain('orchestratord'),
      args: [],
      env: {
        ORCHD_ADDR: `127.0.0.1:${r.port}`,
        LLORCH_API_TOKEN: this.token,
        ORCHD_NODE_HEARTBEAT_MS: String(this.opts.heartbeatMs),
        ORCHD_REDIS_URL: `redis://127.0.0.1:${this.redisPort}/0`,
        ORCHD_REPLICA_ID: r.id,
        ORCHD_ADVERTISE_URL: this.replicaUrl(r),
        ...(this.balancer !== undefined ? { ORCHD_PUBLIC_URL: this.balancer.url } : {}),
        LOG_LEVEL: this.opts.logLevel ?? 'info',
      },
    };
    // a SIGKILLed replica's socket is gone at once, but retry a taken port briefly anyway
    for (let attempt = 0; ; attempt++) {
      try {
        return await launchDaemon(spec, { timeoutMs: 30_000 });
      } catch (err) {
        if (attempt >= 20 || !/EADDRINUSE/.test(String(err))) throw err;
        await sleep(100);
      }
    }
  }

  /** SIGKILL of a replica, then a new one on its port with its id; resolves once it listens. */
  async killReplica(r: ReplicaSlot): Promise<{ oldPid: number; newPid: number; exit: DaemonExit; downMs: number }> {
    const old = r.generations.at(-1) as CapturedDaemon;
    const t0 = Date.now();
    const exit = await old.stop('SIGKILL');
    const next = await this.#startReplica(r);
    r.generations.push(next);
    return { oldPid: old.pid, newPid: next.pid, exit, downMs: Date.now() - t0 };
  }

  /** SIGKILL of redis-server; after `downMs` a new one on the same port and dir (it loads the AOF). */
  async killRedis(
    downMs: number,
    during?: () => Promise<void>,
  ): Promise<{ oldPid: number; newPid: number; exit: DaemonExit; restartedAfterMs: number }> {
    const old = this.redis;
    const t0 = Date.now();
    const exit = await old.kill('SIGKILL');
    await Promise.all([sleep(downMs), during?.()]);
    this.redisGenerations.push(await startRedis(this.redisPort, this.redisDir));
    return { oldPid: old.pid, newPid: this.redis.pid, exit, restartedAfterMs: Date.now() - t0 };
  }

  /** Waits until the replicas (through the balancer) list every node's pool ready and online. */
  async waitPoolsReady(timeoutMs: number): Promise<void> {
    const ids = this.nodes.map((n) => n.poolId);
    const deadline = Date.now() + timeoutMs;
    let last = '';
    while (Date.now() < deadline) {
      const res = await request(new URL('/v2/pools', this.url), { headers: this.auth }).catch(() => undefined);
      if (res !== undefined) {
        const body = (await res.body.json().catch(() => ({}))) as {
          pools?: Array<{ pool_id: string; ready: boolean; node_state: string; state: string }>;
        };
        last = JSON.stringify(body.pools?.map((p) => `${p.pool_id}:${p.state}`));
        if (ids.every((id) => body.pools?.some((p) => p.pool_id === id && p.ready && p.node_state === 'online')))
          return;
      }
      await sleep(100);
    }
    throw new Error(`pools not ready after ${timeoutMs} ms (last seen ${last})`);
  }

  nodePools(node: ChaosNode): Promise<NodePool[]> {
    return fetchNodePools(node, this.auth);
  }

  handoffs(node: ChaosNode): Promise<HandoffInfo[]> {
    return readHandoffs(node);
  }

  /** Every captured line of every daemon generation. */
  allLines(): CapturedLine[] {
    return [...this.replicas.flatMap((r) => r.generations), ...this.nodes.map((n) => n.daemon)].flatMap((d) => d.lines);
  }

  /** SIGTERM: nodes (they stop their engines), then the live replica generations, then HAProxy and Redis. */
  async stop(): Promise<Array<{ name: string } & DaemonExit>> {
    const out: Array<{ name: string } & DaemonExit> = [];
    const nodes = await Promise.all(this.nodes.map((n) => n.daemon.stop('SIGTERM')));
    nodes.forEach((e, i) => out.push({ name: this.nodes[i]?.id ?? '?', ...e }));
    const live = this.replicas.map((r) => r.generations.at(-1) as CapturedDaemon);
    const reps = await Promise.all(live.map((d) => d.stop('SIGTERM')));
    reps.forEach((e, i) => out.push({ name: live[i]?.name ?? '?', ...e }));
    await this.balancer?.stop();
    await this.redis.kill('SIGTERM');
    return out;
  }

  async close(): Promise<void> {
    await Promise.all(this.nodes.map((n) => n.daemon.stop('SIGTERM')));
    await Promise.all(this.replicas.flatMap((r) => r.generations.map((g) => g.stop('SIGTERM'))));
    await this.balancer?.stop();
    await Promise.all(this.redisGenerations.map((g) => g.kill('SIGKILL')));
    await rm(this.workDir, { recursive: true, force: true });
  }
}
