import { Agent } from 'undici';
import type { FileLoggedDaemon } from '@llama-orch/daemon-support/daemon-launcher';
import { admissionPhase } from './admission-load.js';
import { startOrchestratord, waitPoolsReady } from './cluster.js';
import { profFlags, type BenchContext } from './context.js';
import type { BenchPaths } from './repo.js';
import { startFixtureNode } from './fixture.js';
import { cpuSeconds } from './proc.js';
import { relayLoopWindow, type RelayLoopLoad, type RelayLoopWindow } from './relay-loop.js';
import { poolManagerdGeneration, relayGeneration } from './streams.js';
import { BenchError } from '../errors.js';

/**
 * Part 1 of the replicas benchmark: one orchestratord on the in-process store and one on the Redis
 * store, each with its own FIXTURE nodes, loaded in turn (rounds alternate which goes first).
 */

export type StoreKind = 'memory' | 'redis';

/**
 * Node heartbeat interval of the orchestratords and FIXTURE nodes: the product default (5 s; the
 * dispatch-accept timeout follows it). Shorter intervals put heartbeat writes into the per-token
 * cost and, on a CPU-capped replica, declare nodes offline when the heartbeat waits out a throttled period.
 */
export const HEARTBEAT_MS = 5000;

export const STREAM_MODEL = 'fixture:stream';
export const BUSY_MODEL = 'fixture:busy';
/** Period of each FIXTURE stream's tokens: 2 ms (500 tokens/s per stream). */
export const STREAM_TOKEN_INTERVAL_MS = 2;

export interface StoreConfig {
  readonly kind: StoreKind;
  readonly orch: FileLoggedDaemon;
  readonly fixtures: readonly FileLoggedDaemon[];
  /** The first FIXTURE stream node, reached directly for the engine-side TTFT. */
  readonly directUrl: string;
  readonly directPool: string;
  readonly agent: Agent;
}

export interface StoreRound {
  readonly admission: { tasksPerS: number; latenciesMs: number[]; cpuUsPerTask: number; other: Record<string, number> };
  readonly relay: RelayLoopWindow & { cpuUsPerToken: number };
  /** Time to first token, ms: the FIXTURE node alone, and through orchestratord (POST /v2/tasks → first token frame). */
  readonly ttft: { direct: number[]; relayed: number[] };
}

export interface StoreRoundSizes {
  readonly admissionS: number;
  readonly relayLoad: RelayLoopLoad;
  readonly relaySettleS: number;
  readonly relayWindowS: number;
  readonly ttftPairs: number;
}

/** The FIXTURE node whose one slot stays busy (`BUSY_MODEL`): admissions for it queue, the admission load's target. */
export function startBusyNode(
  paths: BenchPaths,
  dir: string,
  orchestratorUrl: string,
  token: string,
  idPrefix: string,
): Promise<FileLoggedDaemon> {
  return startFixtureNode(paths, dir, {
    orchestratorUrl,
    token,
    nodes: 1,
    slotsPerPool: 1,
    model: BUSY_MODEL,
    mode: 'busy',
    tokenIntervalMs: 1000,
    heartbeatMs: HEARTBEAT_MS,
    idPrefix,
  });
}

export async function startStoreConfig(
  ctx: BenchContext,
  kind: StoreKind,
  token: string,
  redisUrl: string,
): Promise<StoreConfig> {
  const orch = await startOrchestratord({
    paths: ctx.paths,
    dir: ctx.dir,
    token,
    heartbeatMs: HEARTBEAT_MS,
    name: `orchestratord-${kind}`,
    env:
      kind === 'redis'
        ? { ORCHD_REDIS_URL: redisUrl, ORCHD_REDIS_PREFIX: 'compare:', ORCHD_REPLICA_ID: 'compare-redis' }
        : {},
    nodeFlags: profFlags(ctx, `replicas-${kind}-orchestratord`),
  });
  const stream = await startFixtureNode(ctx.paths, ctx.dir, {
    orchestratorUrl: orch.url,
    token,
    nodes: 2,
    slotsPerPool: 64,
    model: STREAM_MODEL,
    mode: 'stream',
    tokenIntervalMs: STREAM_TOKEN_INTERVAL_MS,
    heartbeatMs: HEARTBEAT_MS,
    idPrefix: `${kind}-stream`,
  });
  const busy = await startBusyNode(ctx.paths, ctx.dir, orch.url, token, `${kind}-busy`);
  await waitPoolsReady(
    orch.url,
    token,
    [`${kind}-stream-0`, `${kind}-stream-1`, `${kind}-busy-0`],
    [orch, stream, busy],
    30_000,
  );
  return {
    kind,
    orch,
    fixtures: [stream, busy],
    directUrl: stream.url,
    directPool: `${kind}-stream-0`,
    agent: new Agent({ keepAliveTimeout: 60_000 }),
  };
}

export async function stopStoreConfig(c: StoreConfig): Promise<void> {
  await c.agent.close();
  for (const f of c.fixtures) await f.stop();
  await c.orch.stop();
}

async function ttftPairs(
  c: StoreConfig,
  token: string,
  pairs: number,
): Promise<{ direct: number[]; relayed: number[] }> {
  const direct: number[] = [];
  const relayed: number[] = [];
  const viaEngine = async (): Promise<void> => {
    const g = await poolManagerdGeneration(
      c.directUrl,
      c.directPool,
      token,
      { prompt: 'ttft', max_tokens: 2, seed: 1 },
      c.agent,
    );
    direct.push((g.tokenAt[0] as number) - g.sentAt);
  };
  const viaOrch = async (): Promise<void> => {
    const g = await relayGeneration(
      { orchUrl: c.orch.url, token, model: STREAM_MODEL, prompt: 'ttft', maxTokens: 2 },
      c.agent,
    );
    relayed.push((g.tokenAt[0] as number) - g.sentAt);
  };
  for (let i = 0; i < pairs; i++) {
    // Alternating which goes first: neither side always follows the other's work.
    if (i % 2 === 0) {
      await viaEngine();
      await viaOrch();
    } else {
      await viaOrch();
      await viaEngine();
    }
  }
  return { direct, relayed };
}

/** One round on one configuration: admission, then the relay under load, then TTFT with no other load. */
export async function storeRound(
  ctx: BenchContext,
  c: StoreConfig,
  token: string,
  sizes: StoreRoundSizes,
): Promise<StoreRound> {
  const cpu0 = cpuSeconds(c.orch.pid);
  const p = await admissionPhase(c.orch.url, token, BUSY_MODEL, sizes.admissionS, 10);
  const admissionCpu = cpuSeconds(c.orch.pid) - cpu0;
  if (p.admitted === 0)
    throw new BenchError(`${c.kind}: no task admitted: ${JSON.stringify(p.otherStatus)} ${p.sampleBodies.join(' | ')}`);
  const relay = await relayLoopWindow({
    clientScript: ctx.paths.streamClient,
    url: c.orch.url,
    token,
    load: sizes.relayLoad,
    settleS: sizes.relaySettleS,
    windowS: sizes.relayWindowS,
    pids: [c.orch.pid],
  });
  if (relay.tokens === 0) throw new BenchError(`${c.kind}: no token relayed (${JSON.stringify(relay.terminal)})`);
  // The cancelled streams of the load end before the TTFT samples start.
  await new Promise((r) => setTimeout(r, 500));
  const ttft = await ttftPairs(c, token, sizes.ttftPairs);
  return {
    admission: {
      tasksPerS: p.admitted / p.result.duration,
      latenciesMs: p.latencies,
      cpuUsPerTask: (admissionCpu * 1e6) / p.admitted,
      other: p.otherStatus,
    },
    relay: { ...relay, cpuUsPerToken: ((relay.cpuS[0] as number) * 1e6) / relay.tokens },
    ttft,
  };
}
