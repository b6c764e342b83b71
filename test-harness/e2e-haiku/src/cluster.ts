import { existsSync, readFileSync, statSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { request } from 'undici';
import { stringify } from 'yaml';
import { launchDaemon, type CapturedDaemon, type CapturedLine } from '@llama-orch/daemon-support/daemon-launcher';
import { startRedisServer, type RedisServerHandle } from '@llama-orch/daemon-support/redis-server';

/** Repo root: the directory holding pnpm-workspace.yaml above this file. */
export function repoRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, 'pnpm-workspace.yaml'))) {
    const up = dirname(dir);
    if (up === dir) throw new Error('pnpm-workspace.yaml not found above the harness');
    dir = up;
  }
  return dir;
}

export interface ClusterOptions {
  /** Model ref every pool serves. */
  model: string;
  /** Number of pool-managerd nodes (each with one pool `p<n>`). */
  nodes: number;
  /** GPU policy of the pools (`off` here; `required` with a real model on a GPU host). */
  gpu: 'off' | 'optional' | 'required';
  /** Engine/model cache shared with the other suites, so llama-server is built once. */
  cacheDir: string;
  heartbeatMs: number;
  /** Generous: a cold cache means building llama-server first. */
  readyTimeoutMs: number;
  /**
   * Per node (index 0 = `p1`): another model ref, `aliases`, engine `extra_flags` or more pool
   * config keys (`embeddings`, `reranking`, `slots` …) for its pool.
   */
  pools?: ReadonlyArray<
    | {
        model?: string;
        aliases?: readonly string[];
        extraFlags?: readonly string[];
        config?: Readonly<Record<string, unknown>>;
      }
    | undefined
  >;
  /** Every node's `on_demand` (loads catalog models on orchestratord's request, spec 67); absent = none. */
  onDemand?: Readonly<Record<string, unknown>>;
  /** More environment of orchestratord (`ORCHD_CATALOG_FILE`, …). */
  orchestratorEnv?: Readonly<Record<string, string>>;
  /**
   * False: the nodes have no pool of their own (`pools: []`; needs `onDemand`), so they serve only
   * what the catalog loads, and nothing is waited for but orchestratord answering (`poolId` names
   * no pool then). @default true
   */
  staticPools?: boolean;
  /**
   * orchestratord replicas sharing a redis-server the harness starts (Debian's, installed when
   * missing); the nodes register with the first. @default 1: one process, the in-process store
   */
  replicas?: number;
  /** More environment of every daemon (the `OTEL_*` variables, …). */
  env?: Readonly<Record<string, string>>;
}

/** A JSON log line of one of the cluster's daemons. */
export type JsonLogLine = CapturedLine & { json: Record<string, unknown> };

export interface Cluster {
  token: string;
  /** The first replica (the only one without `replicas`): the nodes register with it. */
  orchestrator: CapturedDaemon;
  /** Every orchestratord replica, `orchestrator` first. */
  replicas: CapturedDaemon[];
  nodes: Array<{ id: string; poolId: string; daemon: CapturedDaemon; runtimeDir: string }>;
  workDir: string;
  /** Every JSON log line of every daemon, oldest first (by the time the harness read it). */
  allLogs(): JsonLogLine[];
  close(): Promise<void>;
}

/** Starts orchestratord plus N pool-managerd processes on ephemeral ports and waits for every pool to be ready. */
export async function startCluster(opts: ClusterOptions): Promise<Cluster> {
  const root = repoRoot();
  const token = `e2e-${Math.random().toString(36).slice(2)}-${Date.now().toString(36)}`;
  const workDir = await mkdtemp(join(tmpdir(), 'llorch-e2e-'));
  const started: CapturedDaemon[] = [];
  let redis: RedisServerHandle | undefined;
  try {
    const count = opts.replicas ?? 1;
    if (count > 1) redis = await startRedisServer();
    const replicas: CapturedDaemon[] = [];
    for (let r = 1; r <= count; r++) {
      const replica = await launchDaemon(
        {
          name: count > 1 ? `orchestratord:r${r}` : 'orchestratord',
          script: join(root, 'apps', 'orchestratord', 'dist', 'main.js'),
          output: 'capture',
          env: {
            ORCHD_ADDR: '127.0.0.1:0',
            LLORCH_API_TOKEN: token,
            ORCHD_NODE_HEARTBEAT_MS: String(opts.heartbeatMs),
            LOG_LEVEL: 'info',
            ...(redis !== undefined ? { ORCHD_REDIS_URL: redis.url, ORCHD_REPLICA_ID: `r${r}` } : {}),
            ...opts.env,
            ...opts.orchestratorEnv,
          },
        },
        { timeoutMs: 30_000 },
      );
      started.push(replica);
      replicas.push(replica);
    }
    const orchestrator = replicas[0]!;
    const nodes: Cluster['nodes'] = [];
    for (let n = 1; n <= opts.nodes; n++) {
      const id = `e2e-node-${n}`;
      const poolId = `p${n}`;
      const runtimeDir = join(workDir, id);
      await mkdir(runtimeDir, { recursive: true });
      const configPath = join(workDir, `${id}.yaml`);
      await writeFile(
        configPath,
        stringify({
          node: { id, addr: '127.0.0.1:0' },
          orchestrator: { url: orchestrator.url, heartbeat_interval_ms: opts.heartbeatMs },
          api_token: token,
          runtime_dir: runtimeDir,
          cache_dir: opts.cacheDir,
          pools: [
            {
              id: poolId,
              model: opts.pools?.[n - 1]?.model ?? opts.model,
              gpu: opts.gpu,
              ctx: 2048,
              slots: 1,
              determinism: true,
              threads: 1,
              ...(opts.pools?.[n - 1]?.aliases ? { aliases: opts.pools[n - 1]!.aliases } : {}),
              ...(opts.pools?.[n - 1]?.extraFlags ? { extra_flags: opts.pools[n - 1]!.extraFlags } : {}),
              ...(opts.gpu === 'off' ? {} : { gpu_layers: 'all' }),
              ...opts.pools?.[n - 1]?.config,
            },
          ],
          ...(opts.staticPools === false ? { pools: [] } : {}),
          ...(opts.onDemand ? { on_demand: opts.onDemand } : {}),
        }),
      );
      const daemon = await launchDaemon(
        {
          name: `pool-managerd:${id}`,
          script: join(root, 'apps', 'pool-managerd', 'dist', 'main.js'),
          args: ['--config', configPath],
          output: 'capture',
          env: { LOG_LEVEL: 'info', ...opts.env },
        },
        { timeoutMs: 60_000 },
      );
      started.push(daemon);
      nodes.push({ id, poolId, daemon, runtimeDir });
    }
    await waitAllReady(
      orchestrator.url,
      token,
      opts.staticPools === false ? [] : nodes.map((n) => n.poolId),
      opts.readyTimeoutMs,
      started,
    );
    const store = redis;
    return {
      token,
      orchestrator,
      replicas,
      nodes,
      workDir,
      allLogs: () =>
        started
          .flatMap((d) => d.lines.filter((l): l is JsonLogLine => l.json !== undefined))
          .sort((a, b) => a.at - b.at),
      async close() {
        // pool-managerds first so they deregister while orchestratord still listens
        await Promise.all(nodes.map((n) => n.daemon.stop()));
        await Promise.all(replicas.map((r) => r.stop()));
        await store?.stop();
        await rm(workDir, { recursive: true, force: true });
      },
    };
  } catch (err) {
    await Promise.all(started.map((d) => d.stop('SIGKILL')));
    await redis?.stop();
    await rm(workDir, { recursive: true, force: true });
    throw err;
  }
}

async function waitAllReady(
  orchUrl: string,
  token: string,
  poolIds: string[],
  timeoutMs: number,
  daemons: CapturedDaemon[],
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = '';
  while (Date.now() < deadline) {
    for (const d of daemons) {
      if (!d.alive()) throw new Error(`${d.name} exited while the cluster was starting:\n${d.tail(20)}`);
    }
    const res = await request(new URL('/v2/pools', orchUrl), { headers: { authorization: `Bearer ${token}` } }).catch(
      () => undefined,
    );
    if (res) {
      const body = (await res.body.json()) as { pools?: Array<{ pool_id: string; ready: boolean; state: string }> };
      last = JSON.stringify(body.pools?.map((p) => `${p.pool_id}:${p.state}`));
      if (poolIds.every((id) => body.pools?.some((p) => p.pool_id === id && p.ready))) return;
    }
    await sleep(250);
  }
  throw new Error(`pools not ready after ${timeoutMs} ms (last seen ${last})`);
}

/** Engine URL of a pool, asked from its own pool-managerd (`GET /v2/pools/{id}`: the harness knows nodes only by HTTP). */
export async function engineUrlOf(cluster: Cluster, poolId: string): Promise<string> {
  const node = cluster.nodes.find((n) => n.poolId === poolId);
  if (!node) throw new Error(`unknown pool ${poolId}`);
  const res = await request(new URL(`/v2/pools/${poolId}`, node.daemon.url), {
    headers: { authorization: `Bearer ${cluster.token}` },
  });
  const body = (await res.body.json()) as { engine_url?: string };
  if (!body.engine_url) throw new Error(`pool ${poolId} reports no engine_url`);
  return body.engine_url;
}

/** Whether every slot of an engine is idle (llama-server's `GET /slots`). */
/** How a cancelled generation ended, in the engine's own log. */
export interface CancelOutcome {
  /** llama-server logged `cancel task` for it (it noticed the closed connection). */
  cancelled: boolean;
  /** `n_tokens` of the slot release that ended it (prompt and generated tokens). */
  nTokens: number;
  /** The log lines of the release, for the assertion message. */
  lines: string;
}

/**
 * Runs `abort` during a long generation on pool `poolId`'s engine and reads how the engine ended
 * it from its own log (pool-managerd copies it to the file its `engine spawned` line names):
 * `cancel task` and the release's `n_tokens`. Only the log is read after the abort: polling
 * `/slots` kept a cancelled non-streamed generation running in upstream llama.cpp, which noticed the
 * closed connection only after a whole second in which no result of any task reached that request's
 * thread (`/slots` answers are results; llama-orch's carried patch bounds the wait to a second
 * whatever arrives). And `n_decoded` after the release reads 0 whatever happened.
 */
export async function cancelOutcome(
  cluster: Cluster,
  poolId: string,
  abort: () => void,
  timeoutMs = 60_000,
): Promise<CancelOutcome> {
  const spawned = cluster
    .allLogs()
    .filter((l) => l.json.msg === 'engine spawned' && l.json.pool_id === poolId && typeof l.json.log === 'string')
    .at(-1);
  if (spawned === undefined) throw new Error(`no 'engine spawned' line for pool ${poolId}`);
  const logPath = spawned.json.log as string;
  const engineUrl = await engineUrlOf(cluster, poolId);
  const deadline = Date.now() + timeoutMs;
  while (await engineIdle(engineUrl)) {
    if (Date.now() > deadline) throw new Error('the engine never started the generation');
    await sleep(10);
  }
  const offset = statSync(logPath).size;
  abort();
  for (;;) {
    const text = readFileSync(logPath, 'utf8').slice(offset);
    const release = /stop processing: n_tokens = (\d+)/.exec(text);
    if (release !== null)
      return { cancelled: /cancel task/.test(text), nTokens: Number(release[1]), lines: text.slice(0, 2000) };
    if (Date.now() > deadline) throw new Error(`the engine logged no slot release within ${timeoutMs} ms of the abort`);
    await sleep(50);
  }
}

export async function engineIdle(engineUrl: string): Promise<boolean> {
  const res = await request(new URL('/slots', engineUrl));
  const slots = (await res.body.json()) as Array<{ is_processing: boolean }>;
  return slots.every((s) => !s.is_processing);
}

/**
 * The pool a request's task was placed on: orchestratord's `task placed` line carrying the
 * request's correlation id (the last one, should the task have been re-placed). Polls briefly,
 * since the line may still be in a pipe.
 */
export async function placedPool(cluster: Cluster, correlationId: string, timeoutMs = 3000): Promise<string> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const line = cluster
      .allLogs()
      .filter(
        (l) => l.source === 'orchestratord' && l.json.msg === 'task placed' && l.json.correlation_id === correlationId,
      )
      .at(-1);
    if (line && typeof line.json.pool_id === 'string') return line.json.pool_id;
    if (Date.now() > deadline) throw new Error(`no 'task placed' line for correlation id ${correlationId}`);
    await sleep(25);
  }
}

/**
 * The `msg` of each line that carries `correlationId`, from the daemons `from` accepts by source,
 * once every message of `want` is among them or `timeoutMs` passed (then the test's own assertion
 * reports what is missing): both daemons buffer their log lines for up to 100 ms.
 */
export async function correlatedMessages(
  cluster: Cluster,
  correlationId: string,
  from: (source: string) => boolean,
  want: readonly string[],
  timeoutMs = 3000,
): Promise<unknown[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const msgs = cluster
      .allLogs()
      .filter((l) => from(l.source) && l.json.correlation_id === correlationId)
      .map((l) => l.json.msg);
    if (want.every((m) => msgs.includes(m)) || Date.now() > deadline) return msgs;
    await sleep(25);
  }
}

/** Waits until orchestratord sees every pool ready with all its slots free and nothing leased. */
export async function waitClusterIdle(cluster: Cluster, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = '';
  while (Date.now() < deadline) {
    const res = await request(new URL('/v2/pools', cluster.orchestrator.url), {
      headers: { authorization: `Bearer ${cluster.token}` },
    });
    const body = (await res.body.json()) as {
      pools: Array<{ pool_id: string; ready: boolean; leased: number; slots_free: number; slots_total: number }>;
    };
    last = JSON.stringify(body.pools);
    if (body.pools.every((p) => p.ready && p.leased === 0 && p.slots_free === p.slots_total)) return;
    await sleep(25);
  }
  throw new Error(`cluster not idle after ${timeoutMs} ms: ${last}`);
}

/** Where the harness writes proof bundles (gitignored). */
export function proofRoot(): string {
  return resolve(repoRoot(), 'test-harness', 'e2e-haiku', 'proof');
}
