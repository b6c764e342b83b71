import { randomBytes } from 'node:crypto';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { stringify } from 'yaml';
import { launchDaemon, type FileLoggedDaemon } from '@llama-orch/daemon-support/daemon-launcher';
import { ClusterNotReadyError } from '../errors.js';
import { httpJson } from './http.js';
import type { BenchPaths } from './repo.js';

/** The model every real-engine benchmark uses: generated GGUF, real tokenizer, real llama-server. */
export const SYNTHETIC_MODEL = 'synthetic:llama';

export function newToken(): string {
  return `bench-${randomBytes(16).toString('hex')}`;
}

export interface OrchestratordOptions {
  paths: BenchPaths;
  dir: string;
  token: string;
  heartbeatMs: number;
  /** Extra env (ORCHD_ADMISSION_CAPACITY, ORCHD_STREAM_GRACE_MS, LOG_LEVEL …). */
  env?: Readonly<Record<string, string>>;
  nofile?: number;
  nodeFlags?: readonly string[];
  name?: string;
}

/** Starts orchestratord on an ephemeral port (`ORCHD_ADDR=127.0.0.1:0`). Logs at `info` unless env says otherwise. */
export async function startOrchestratord(o: OrchestratordOptions): Promise<FileLoggedDaemon> {
  return launchDaemon(
    {
      name: o.name ?? 'orchestratord',
      script: o.paths.orchestratord,
      output: { file: join(o.dir, `${o.name ?? 'orchestratord'}.log`) },
      envMode: 'minimal',
      env: {
        ORCHD_ADDR: '127.0.0.1:0',
        LLORCH_API_TOKEN: o.token,
        ORCHD_NODE_HEARTBEAT_MS: String(o.heartbeatMs),
        LOG_LEVEL: 'info',
        ...(o.env ?? {}),
      },
      ...(o.nofile !== undefined ? { nofile: o.nofile } : {}),
      ...(o.nodeFlags !== undefined ? { nodeFlags: o.nodeFlags } : {}),
    },
    { timeoutMs: 30_000 },
  );
}

export interface PoolSpec {
  id: string;
  /** Model ref. @default SYNTHETIC_MODEL */
  model?: string;
  /** @default 1 */
  slots?: number;
  /** @default 2048 */
  ctx?: number;
  /** @default true (one slot, no continuous batching) */
  determinism?: boolean;
  /** Engine threads. @default 1 (leaves the other core to the Node processes) */
  threads?: number;
  /** Serve embeddings (`embeddings: true`). @default false */
  embeddings?: boolean;
  /** llama-server flags of the pool (`extra_flags`). @default none */
  extraFlags?: readonly string[];
  /** Other names clients may use for the pool's model. @default none */
  aliases?: readonly string[];
}

/** A node's `on_demand` section (OnDemandConfigSchema): the memory loads on request may take, and their engines' threads. */
export interface OnDemandSpec {
  memoryBudgetBytes: number;
  /** @default 8 */
  maxPools?: number;
  /** Engine threads of each load. @default 1 (as the benchmarks' YAML pools) */
  threads?: number;
}

export interface PoolManagerdOptions {
  paths: BenchPaths;
  dir: string;
  nodeId: string;
  token: string;
  /** Absent = standalone (no registration). */
  orchestratorUrl?: string;
  heartbeatMs?: number;
  pools: readonly PoolSpec[];
  /** Load catalog models on orchestratord's request (`on_demand`); absent = only `pools`. */
  onDemand?: OnDemandSpec;
  nodeFlags?: readonly string[];
  /** @default 60000 (a cold cache builds llama-server before the first pool starts, but HTTP listens first) */
  timeoutMs?: number;
  /** Extra env (the `OTEL_*` variables …). */
  env?: Readonly<Record<string, string>>;
}

export interface PoolManagerdHandle {
  daemon: FileLoggedDaemon;
  nodeId: string;
  runtimeDir: string;
  configPath: string;
}

/** Writes a pool-managerd YAML (PoolManagerConfigSchema) and starts it. */
export async function startPoolManagerd(o: PoolManagerdOptions): Promise<PoolManagerdHandle> {
  const runtimeDir = join(o.dir, o.nodeId);
  await mkdir(runtimeDir, { recursive: true });
  const configPath = join(o.dir, `${o.nodeId}.yaml`);
  const config: Record<string, unknown> = {
    node: { id: o.nodeId, addr: '127.0.0.1:0' },
    api_token: o.token,
    runtime_dir: runtimeDir,
    cache_dir: o.paths.cacheDir,
    pools: o.pools.map((p) => ({
      id: p.id,
      model: p.model ?? SYNTHETIC_MODEL,
      gpu: 'off',
      ctx: p.ctx ?? 2048,
      slots: p.slots ?? 1,
      determinism: p.determinism ?? true,
      threads: p.threads ?? 1,
      ...(p.embeddings === true ? { embeddings: true } : {}),
      ...(p.extraFlags !== undefined ? { extra_flags: [...p.extraFlags] } : {}),
      ...(p.aliases !== undefined ? { aliases: [...p.aliases] } : {}),
    })),
  };
  if (o.onDemand !== undefined) {
    config.on_demand = {
      memory_budget_bytes: o.onDemand.memoryBudgetBytes,
      ...(o.onDemand.maxPools !== undefined ? { max_pools: o.onDemand.maxPools } : {}),
      threads: o.onDemand.threads ?? 1,
    };
  }
  if (o.orchestratorUrl !== undefined) {
    config.orchestrator = { url: o.orchestratorUrl, heartbeat_interval_ms: o.heartbeatMs ?? 5000 };
  }
  await writeFile(configPath, stringify(config));
  const daemon = await launchDaemon(
    {
      name: `pool-managerd:${o.nodeId}`,
      script: o.paths.poolManagerd,
      args: ['--config', configPath],
      output: { file: join(o.dir, `${o.nodeId}.log`) },
      envMode: 'minimal',
      env: { LOG_LEVEL: 'info', ...(o.env ?? {}) },
      ...(o.nodeFlags !== undefined ? { nodeFlags: o.nodeFlags } : {}),
    },
    { timeoutMs: o.timeoutMs ?? 60_000 },
  );
  return { daemon, nodeId: o.nodeId, runtimeDir, configPath };
}

/** pool-managerd's view of one pool (`GET /v2/pools/{id}`), the fields benchmarks read. */
export interface PoolStatusView {
  pool_id: string;
  state: string;
  ready: boolean;
  slots_total: number;
  slots_free: number;
  engine_url?: string;
  last_error?: string;
}

export async function poolStatus(
  pm: PoolManagerdHandle,
  poolId: string,
  token: string,
): Promise<PoolStatusView | undefined> {
  const r = await httpJson<PoolStatusView>('GET', `${pm.daemon.url}/v2/pools/${poolId}`, { token }).catch(
    () => undefined,
  );
  return r?.status === 200 ? r.body : undefined;
}

/**
 * Waits until orchestratord lists every pool id as ready (a cold cache builds llama-server first:
 * minutes). Throws when a daemon exits meanwhile.
 */
export async function waitPoolsReady(
  orchUrl: string,
  token: string,
  poolIds: readonly string[],
  daemons: readonly FileLoggedDaemon[],
  timeoutMs: number,
): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  let last = '';
  while (performance.now() < deadline) {
    for (const d of daemons) {
      if (d.state === 'exited')
        throw new ClusterNotReadyError(`${d.name} exited while the cluster was starting:\n${d.tail()}`);
    }
    const r = await httpJson<{ pools?: Array<{ pool_id: string; ready: boolean; state: string; node_state: string }> }>(
      'GET',
      `${orchUrl}/v2/pools`,
      { token },
    ).catch(() => undefined);
    if (r?.status === 200) {
      last = JSON.stringify(r.body.pools?.map((p) => `${p.pool_id}:${p.state}/${p.node_state}`));
      if (poolIds.every((id) => r.body.pools?.some((p) => p.pool_id === id && p.ready && p.node_state === 'online')))
        return;
    }
    await sleep(100);
  }
  throw new ClusterNotReadyError(`pools ${poolIds.join(', ')} not ready after ${timeoutMs} ms (last seen ${last})`);
}

/** Waits until a node is idle again from orchestratord's view: online, every pool ready with all slots free. */
export async function waitNodeIdle(orchUrl: string, token: string, nodeId: string, timeoutMs: number): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (performance.now() < deadline) {
    const r = await httpJson<{
      pools: Array<{
        node_id: string;
        ready: boolean;
        node_state: string;
        leased: number;
        slots_free: number;
        slots_total: number;
      }>;
    }>('GET', `${orchUrl}/v2/pools`, { token }).catch(() => undefined);
    const pools = r?.status === 200 ? r.body.pools.filter((p) => p.node_id === nodeId) : [];
    if (
      pools.length > 0 &&
      pools.every((p) => p.node_state === 'online' && p.ready && p.leased === 0 && p.slots_free === p.slots_total)
    )
      return;
    await sleep(20);
  }
  throw new ClusterNotReadyError(`node ${nodeId} not idle after ${timeoutMs} ms`);
}

/** How long the first pool start may take: a cold cache builds llama-server (~5 min on 2 cores). */
export const COLD_START_TIMEOUT_MS = 15 * 60_000;
