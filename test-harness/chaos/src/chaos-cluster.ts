import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { request } from 'undici';
import { stringify } from 'yaml';
import { repoRoot } from '@llama-orch/e2e-haiku';
import { startChaosDaemon, type CapturedLine, type ChaosDaemon, type DaemonExit } from './daemon.js';

/** Built entry points the suite runs (the README test command builds them first). */
export function appMain(app: 'orchestratord' | 'pool-managerd'): string {
  const path = join(repoRoot(), 'apps', app, 'dist', 'main.js');
  if (!existsSync(path)) throw new Error(`${path} is missing: run \`pnpm build\` first`);
  return path;
}

/** Engine/model cache shared by every suite (`LLORCH_TEST_CACHE_DIR` or `<repo>/.cache/llama-orch`). */
export function sharedCacheDir(): string {
  const fromEnv = process.env.LLORCH_TEST_CACHE_DIR;
  return fromEnv !== undefined && fromEnv !== '' ? fromEnv : join(repoRoot(), '.cache', 'llama-orch');
}

/** A token of the product's minimum length plus noise, unique per run. */
export function newToken(prefix: string): string {
  return `${prefix}-${randomBytes(12).toString('hex')}`;
}

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

export interface ChaosNode {
  id: string;
  poolId: string;
  runtimeDir: string;
  configPath: string;
  daemon: ChaosDaemon;
}

/** A handoff file as read from `<runtime_dir>/engines/*.json` (only the fields the suite uses). */
export interface HandoffInfo {
  file: string;
  pool_id: string;
  pid: number;
  url: string;
  provisioning_mode: string;
}

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
  readonly orchestrators: ChaosDaemon[] = [];
  readonly port: number;
  readonly #opts: ChaosClusterOptions;

  private constructor(opts: ChaosClusterOptions, token: string, workDir: string, orchestrator: ChaosDaemon) {
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
      const orchestrator = await startChaosDaemon(ChaosCluster.#orchSpec(opts, token, '127.0.0.1:0', 0), 30_000);
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

  static #orchSpec(opts: ChaosClusterOptions, token: string, addr: string, generation: number) {
    return {
      name: `orchestratord#${generation}`,
      script: appMain('orchestratord'),
      args: [],
      env: {
        ORCHD_ADDR: addr,
        LLORCH_API_TOKEN: token,
        ORCHD_NODE_HEARTBEAT_MS: String(opts.heartbeatMs),
        LOG_LEVEL: opts.logLevel ?? 'info',
        // the restart fault is the cut (tasks held end with an error frame, as before the SIGTERM
        // drain existed): a drain would let them finish and test nothing of that path
        ORCHD_DRAIN_GRACE_MS: '0',
        ...opts.orchestratorEnv,
      },
    };
  }

  get orchestrator(): ChaosDaemon {
    return this.orchestrators.at(-1) as ChaosDaemon;
  }

  get url(): string {
    return this.orchestrator.url;
  }

  get auth(): Record<string, string> {
    return { authorization: `Bearer ${this.token}` };
  }

  async #startNode(n: number): Promise<ChaosNode> {
    const id = `chaos-node-${n}`;
    const poolId = `p${n}`;
    const runtimeDir = join(this.workDir, id);
    await mkdir(runtimeDir, { recursive: true });
    const configPath = join(this.workDir, `${id}.yaml`);
    await writeFile(
      configPath,
      stringify({
        node: { id, addr: '127.0.0.1:0' },
        orchestrator: { url: `http://127.0.0.1:${this.port}`, heartbeat_interval_ms: this.#opts.heartbeatMs },
        api_token: this.token,
        runtime_dir: runtimeDir,
        cache_dir: this.#opts.cacheDir ?? sharedCacheDir(),
        pools: [
          {
            id: poolId,
            model: this.#opts.model ?? 'synthetic:llama',
            gpu: 'off',
            ctx: this.#opts.ctx ?? 2048,
            slots: this.#opts.slots,
            threads: this.#opts.threads ?? 1,
          },
        ],
      }),
    );
    const daemon = await startChaosDaemon(
      {
        name: `pool-managerd:${id}`,
        script: appMain('pool-managerd'),
        args: ['--config', configPath],
        env: { LOG_LEVEL: this.#opts.logLevel ?? 'info', LLORCH_CHAOS_RUN: this.workDir },
        cwd: runtimeDir,
      },
      60_000,
    );
    const node = { id, poolId, runtimeDir, configPath, daemon };
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
        if (ids.every((id) => body.pools?.some((p) => p.pool_id === id && p.ready && p.node_state === 'online'))) return;
      }
      await sleep(100);
    }
    throw new Error(`pools not ready after ${timeoutMs} ms (last seen ${last})`);
  }

  /**
   * Stops orchestratord with `signal` and starts a new generation on the same port.
   * Resolves once the new one listens (nodes re-register on their own).
   */
  async restartOrchestrator(signal: NodeJS.Signals = 'SIGTERM'): Promise<{ oldPid: number; newPid: number; exit: DaemonExit; downMs: number }> {
    const old = this.orchestrator;
    const t0 = Date.now();
    const exit = await old.stop(signal);
    const spec = ChaosCluster.#orchSpec(this.#opts, this.token, `127.0.0.1:${this.port}`, this.orchestrators.length);
    let next: ChaosDaemon | undefined;
    // the old socket may linger for a moment after exit; retry the bind briefly
    for (let attempt = 0; next === undefined; attempt++) {
      try {
        next = await startChaosDaemon(spec, 30_000);
      } catch (err) {
        if (attempt >= 20 || !/EADDRINUSE/.test(String(err))) throw err;
        await sleep(100);
      }
    }
    this.orchestrators.push(next);
    return { oldPid: old.pid, newPid: next.pid, exit, downMs: Date.now() - t0 };
  }

  /** pool-managerd's own view of its pools (`GET /v2/pools` on the node). */
  async nodePools(
    node: ChaosNode,
  ): Promise<
    Array<Record<string, unknown> & { pool_id: string; ready: boolean; state: string; slots_total: number; slots_free: number; active_leases: number; engine_url?: string }>
  > {
    const res = await request(new URL('/v2/pools', node.daemon.url), { headers: this.auth });
    const body = (await res.body.json()) as { pools: never[] };
    if (res.statusCode !== 200) throw new Error(`${node.id} /v2/pools answered ${res.statusCode}`);
    return body.pools;
  }

  /** Handoff files currently in a node's `<runtime_dir>/engines`. */
  async handoffs(node: ChaosNode): Promise<HandoffInfo[]> {
    const dir = join(node.runtimeDir, 'engines');
    const out: HandoffInfo[] = [];
    let names: string[];
    try {
      names = await readdir(dir);
    } catch {
      return out;
    }
    for (const name of names) {
      if (!name.endsWith('.json') || name.startsWith('.')) continue;
      try {
        const json = JSON.parse(await readFile(join(dir, name), 'utf8')) as Record<string, unknown>;
        if (typeof json.pid === 'number' && typeof json.url === 'string' && typeof json.pool_id === 'string') {
          out.push({ file: join(dir, name), pool_id: json.pool_id, pid: json.pid, url: json.url, provisioning_mode: String(json.provisioning_mode) });
        }
      } catch {
        // mid-rename or removed: the next poll sees it
      }
    }
    return out;
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
