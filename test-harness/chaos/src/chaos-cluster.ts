import { mkdtemp, rm } from 'node:fs/promises';
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
import {
  fetchNodePools,
  readHandoffs,
  startChaosNode,
  type ChaosNode,
  type HandoffInfo,
  type NodePool,
} from './chaos-node.js';
import { appMain, newToken } from './chaos-paths.js';

export { appMain, newToken, sharedCacheDir } from './chaos-paths.js';

export interface ChaosClusterOptions {
  /** pool-managerd nodes, each with one pool `p<n>`. */
  nodes: number;
  /** Engine slots per pool (`--parallel`). */
  slots: number;
  /** Heartbeat interval of nodes and orchestratord's expectation, ms (offline after 3 missed). */
  heartbeatMs: number;
  /** Model ref of every pool. @default synthetic:llama */
  model?: string;
  /** @default sharedCacheDir() */
  cacheDir?: string;
  /** Engine ctx (shared by the slots). @default 2048 */
  ctx?: number;
  /** Engine threads. @default 1 */
  threads?: number;
  /** Extra orchestratord environment. */
  orchestratorEnv?: Record<string, string>;
  /** Pool readiness timeout; generous, a cold cache builds llama-server first. @default 30 min */
  readyTimeoutMs?: number;
  /** Daemon log level. @default info */
  logLevel?: string;
  /** Directory prefix of the work dir. @default llorch-chaos- */
  prefix?: string;
}

export type { ChaosNode, HandoffInfo } from './chaos-node.js';

interface PoolsBody {
  pools?: Array<Record<string, unknown> & { pool_id: string; ready: boolean; state: string }>;
}

/**
 * orchestratord + N pool-managerd processes with real llama-servers on loopback. Unlike the e2e
 * harness it can restart orchestratord on the same port (nodes keep their configured URL and
 * re-register on the 404 of their next heartbeat), captures every output line of every daemon
 * generation, and marks engines (cwd = node runtime dir, env marker) for the orphan check.
 */
export class ChaosCluster {
  readonly token: string;
  readonly workDir: string;
  /** `NAME=value` in every pool-managerd's (and so every engine's) environment. */
  readonly marker: string;
  readonly nodes: ChaosNode[] = [];
  /** Every orchestratord generation, oldest first. */
  readonly orchestrators: CapturedDaemon[] = [];
  readonly port: number;
  readonly #opts: ChaosClusterOptions;

  private constructor(opts: ChaosClusterOptions, token: string, workDir: string, orchestrator: CapturedDaemon) {
    this.#opts = opts;
    this.token = token;
    this.workDir = workDir;
    this.marker = `LLORCH_CHAOS_RUN=${workDir}`;
    this.orchestrators.push(orchestrator);
    this.port = Number(new URL(orchestrator.url).port);
  }

  static async start(opts: ChaosClusterOptions): Promise<ChaosCluster> {
    const token = newToken('chaos-token');
    const workDir = await mkdtemp(join(tmpdir(), opts.prefix ?? 'llorch-chaos-'));
    let cluster: ChaosCluster | undefined;
    try {
      const orchestrator = await launchDaemon(ChaosCluster.#orchSpec(opts, token, '127.0.0.1:0', 0), {
        timeoutMs: 30_000,
      });
      cluster = new ChaosCluster(opts, token, workDir, orchestrator);
      for (let n = 1; n <= opts.nodes; n++) await cluster.#startNode(n);
      await cluster.waitPoolsReady(opts.readyTimeoutMs ?? 30 * 60_000);
      return cluster;
    } catch (err) {
      if (cluster !== undefined) await cluster.close();
      else await rm(workDir, { recursive: true, force: true });
      throw err;
    }
  }

  static #orchSpec(opts: ChaosClusterOptions, token: string, addr: string, generation: number): DaemonSpec<'capture'> {
    return {
      name: `orchestratord#${generation}`,
      output: 'capture',
      script: appMain('orchestratord'),
      args: [],
      env: {
        ORCHD_ADDR: addr,
        LLORCH_API_TOKEN: token,
        ORCHD_NODE_HEARTBEAT_MS: String(opts.heartbeatMs),
        LOG_LEVEL: opts.logLevel ?? 'info',
        // the restart fault is the cut (tasks held end with an error frame, no SIGTERM drain): a
        // drain would let them finish and test nothing of that path
        ORCHD_DRAIN_GRACE_MS: '0',
        ...opts.orchestratorEnv,
      },
    };
  }

  get orchestrator(): CapturedDaemon {
    return this.orchestrators.at(-1) as CapturedDaemon;
  }

  get url(): string {
    return this.orchestrator.url;
  }

  get auth(): Record<string, string> {
    return { authorization: `Bearer ${this.token}` };
  }

  async #startNode(n: number): Promise<ChaosNode> {
    const node = await startChaosNode({
      ...this.#opts,
      n,
      workDir: this.workDir,
      token: this.token,
      orchestratorUrl: `http://127.0.0.1:${this.port}`,
    });
    this.nodes.push(node);
    return node;
  }

  /** Every captured line of every daemon (all orchestratord generations included). */
  allLines(): CapturedLine[] {
    return [...this.orchestrators, ...this.nodes.map((n) => n.daemon)].flatMap((d) => d.lines);
  }

  /** Waits until orchestratord lists every configured pool as ready. */
  async waitPoolsReady(timeoutMs: number): Promise<void> {
    const ids = this.nodes.map((n) => n.poolId);
    const deadline = Date.now() + timeoutMs;
    let last = '';
    while (Date.now() < deadline) {
      for (const d of [this.orchestrator, ...this.nodes.map((n) => n.daemon)]) {
        if (!d.alive())
          throw new Error(
            `${d.name} exited while waiting for pools:\n${d.lines
              .slice(-20)
              .map((l) => l.text)
              .join('\n')}`,
          );
      }
      const res = await request(new URL('/v2/pools', this.url), { headers: this.auth }).catch(() => undefined);
      if (res !== undefined) {
        const body = (await res.body.json().catch(() => ({}))) as PoolsBody;
        last = JSON.stringify(body.pools?.map((p) => `${p.pool_id}:${p.state}`));
        if (ids.every((id) => body.pools?.some((p) => p.pool_id === id && p.ready && p.node_state === 'online')))
          return;
      }
      await sleep(100);
    }
    throw new Error(`pools not ready after ${timeoutMs} ms (last seen ${last})`);
  }

  /**
   * Stops orchestratord with `signal` and starts a new generation on the same port.
   * Resolves once the new one listens (nodes re-register on their own).
   */
  async restartOrchestrator(
    signal: NodeJS.Signals = 'SIGTERM',
  ): Promise<{ oldPid: number; newPid: number; exit: DaemonExit; downMs: number }> {
    const old = this.orchestrator;
    const t0 = Date.now();
    const exit = await old.stop(signal);
    const spec = ChaosCluster.#orchSpec(this.#opts, this.token, `127.0.0.1:${this.port}`, this.orchestrators.length);
    let next: CapturedDaemon | undefined;
    // the old socket may linger for a moment after exit; retry the bind briefly
    for (let attempt = 0; next === undefined; attempt++) {
      try {
        next = await launchDaemon(spec, { timeoutMs: 30_000 });
      } catch (err) {
        if (attempt >= 20 || !/EADDRINUSE/.test(String(err))) throw err;
        await sleep(100);
      }
    }
    this.orchestrators.push(next);
    return { oldPid: old.pid, newPid: next.pid, exit, downMs: Date.now() - t0 };
  }

  /** pool-managerd's own view of its pools (`GET /v2/pools` on the node). */
  nodePools(node: ChaosNode): Promise<NodePool[]> {
    return fetchNodePools(node, this.auth);
  }

  /** Handoff files currently in a node's `<runtime_dir>/engines`. */
  handoffs(node: ChaosNode): Promise<HandoffInfo[]> {
    return readHandoffs(node);
  }

  /** Stops every node (SIGTERM → they deregister and stop engines) then orchestratord. Idempotent. */
  async stop(): Promise<DaemonExit[]> {
    const exits = await Promise.all(this.nodes.map((n) => n.daemon.stop('SIGTERM')));
    exits.push(await this.orchestrator.stop('SIGTERM'));
    return exits;
  }

  /** Stops everything (if still running) and removes the work dir. */
  async close(): Promise<void> {
    await Promise.all(this.nodes.map((n) => n.daemon.stop('SIGTERM')));
    await Promise.all(this.orchestrators.map((o) => o.stop('SIGTERM')));
    await rm(this.workDir, { recursive: true, force: true });
  }
}
