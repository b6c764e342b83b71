import { spawn } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { freeLoopbackPort } from '@llama-orch/daemon-support';
import type { JsonLine } from '@llama-orch/daemon-support/daemon-launcher';
import { request } from 'undici';
import { BenchError, ClusterNotReadyError, UnexpectedResponseError } from '../errors.js';
import type { PoolManagerdHandle } from './cluster.js';
import { httpJson } from './http.js';
import {
  enginePid,
  fleetPoolsOf,
  logTime,
  nodePool,
  processAlive,
  processArgv,
  streamCompletion,
  unloadModel,
  type BenchModel,
} from './on-demand.js';
import { rssBytes } from './proc.js';

/**
 * `pnpm bench lifecycle`, the cold load: a catalog model cached on the node but loaded nowhere,
 * asked for through orchestratord (load on first request), against the same llama-server binary
 * and flags spawned directly; and what the node projected for each model against what its engine
 * holds after requests (spec 50, Memory).
 */

export const PROMPT = 'Once upon a time';
const FILL_SENTENCE = 'the quick brown fox jumps over the lazy dog. ';
/** Tokens of {@link FILL_SENTENCE} with the synthetic models' vocabulary (60 of them are 722 with BOS), rounded up. */
const FILL_SENTENCE_TOKENS = 12.1;

/**
 * A prompt of ~600 tokens, one full 512-token micro-batch as in spec 50's projected-vs-measured
 * table, or as much of it as a slot of `slotCtx` tokens takes (llama-server caps a slot at the
 * model's training context: 256 for the default synthetic model).
 */
export function fillPrompt(slotCtx: number): string {
  const tokens = Math.min(600, slotCtx - 16);
  return FILL_SENTENCE.repeat(Math.max(1, Math.floor(tokens / FILL_SENTENCE_TOKENS)));
}

/** The on-demand cluster of this part: one orchestratord, one node with `on_demand` and no YAML pool. */
export interface OnDemandCluster {
  readonly orchUrl: string;
  readonly token: string;
  readonly node: PoolManagerdHandle;
  /** orchestratord's log lines so far. */
  readonly orchLogs: () => JsonLine[];
}

/** One cold request through orchestratord. Phases are ms from the request, from the node's log (pino wall clock). */
export interface ColdSample {
  firstTokenMs: number;
  doneMs: number;
  text: string;
  poolId: string;
  phases: {
    /** orchestratord's `task admitted` (the load asked and the pool listed). */
    taskAdmitted: number;
    loadAccepted: number;
    engineSpawned: number;
    engineHealthy: number;
    poolReady: number;
    /** orchestratord's `task placed` (it saw the pool ready in a heartbeat). */
    taskPlaced: number;
  };
  /** Spawn → `listening on http` by the engine's own log clock. */
  engineListeningMs: number;
  /** The projection the node logged when it accepted the load (absent: the model was not on the host yet). */
  projectedBytes: number | undefined;
  /** How the node projected it and the terms (its `memory projected` line: `method`, `human`), when it says. */
  projectionMethod: string | undefined;
  projectionTerms: string | undefined;
  /** The engine's VmRSS right after the 1-token request. */
  rssBytes: number;
  /** The pool's `memory_bytes` on the node then (max of RSS and projection). */
  reportedBytes: number | undefined;
  /** Unload request → the model gone from orchestratord's GET /v2/pools. */
  unloadMs: number;
}

/** The engine spawned directly with the node's flags: spawn → /health 200 (2 ms polls) → first token of a 1-token completion. */
export interface DirectSample {
  healthMs: number;
  /** Spawn → `listening on http` by the engine's own log clock. */
  engineListeningMs: number;
  firstTokenMs: number;
  text: string;
}

/** Longer than the daemons' log buffer holds a line (100 ms). */
const LOG_FLUSH_MS = 150;

const coldBody = (model?: string): Record<string, unknown> => ({
  ...(model !== undefined ? { model } : {}),
  prompt: PROMPT,
  max_tokens: 1,
  temperature: 0,
});

/**
 * When llama-server logged `listening on http`, ms after its start by its own clock (the line's
 * `M.SS.mmm.uuu` stamp); NaN when the log has no such line.
 */
export async function engineListeningMs(logPath: string): Promise<number> {
  const text = await readFile(logPath, 'utf8').catch(() => '');
  const m = /^(\d+)\.(\d{2})\.(\d{3})\.(\d{3}) .*listening on http/m.exec(text);
  if (m === null) return Number.NaN;
  return Number(m[1]) * 60_000 + Number(m[2]) * 1000 + Number(m[3]) + Number(m[4]) / 1000;
}

/** Polls orchestratord's GET /v2/nodes until `nodeId` is online. */
export async function waitNodeOnline(orchUrl: string, token: string, nodeId: string, timeoutMs: number): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (performance.now() < deadline) {
    const r = await httpJson<{ nodes: Array<{ node_id: string; state: string }> }>('GET', `${orchUrl}/v2/nodes`, {
      token,
    }).catch(() => undefined);
    if (r?.status === 200 && r.body.nodes.some((n) => n.node_id === nodeId && n.state === 'online')) return;
    await sleep(50);
  }
  throw new ClusterNotReadyError(`node ${nodeId} not online after ${timeoutMs} ms`);
}

/** The single pool orchestratord lists for `model` once it is loaded. */
async function loadedPool(c: OnDemandCluster, model: BenchModel): Promise<string> {
  const pools = await fleetPoolsOf(c.orchUrl, c.token, model);
  const pool = pools.find((p) => p.ready);
  if (pool === undefined)
    throw new BenchError(`after its request ${model.ref} has no ready pool: ${JSON.stringify(pools)}`);
  return pool.pool_id;
}

/**
 * One cold load through orchestratord: the model loaded nowhere, a streamed 1-token
 * `POST /v1/completions` naming its alias, timed to its first token; then the engine's RSS, and
 * the unload (`POST /v2/catalog/models/{id}/unload`, waited until GET /v2/pools drops it and its
 * engine exited). `beforeUnload` runs with the loaded pool (the projection table's fill request).
 */
export async function coldSample(
  c: OnDemandCluster,
  model: BenchModel,
  beforeUnload?: (poolId: string, pid: number) => Promise<void>,
): Promise<ColdSample & { argv: string[] }> {
  if ((await fleetPoolsOf(c.orchUrl, c.token, model)).length > 0)
    throw new BenchError(`${model.ref} is loaded before its cold sample`);
  const t0 = performance.now();
  const wall0 = performance.timeOrigin + t0;
  const s = await streamCompletion(c.orchUrl, coldBody(model.alias), { token: c.token, t0 });
  const poolId = await loadedPool(c, model);
  const pid = await enginePid(c.node.runtimeDir, poolId);
  const rss = rssBytes(pid);
  const reported = (await nodePool(c.node.daemon.url, c.token, poolId))?.memory_bytes;
  const argv = await processArgv(pid);
  await beforeUnload?.(poolId, pid);
  const unloadMs = await unloadModel(c.orchUrl, c.token, model);
  const exitDeadline = performance.now() + 10_000;
  while (await processAlive(pid)) {
    if (performance.now() > exitDeadline)
      throw new BenchError(`engine ${pid} of ${poolId} still runs after its unload`);
    await sleep(5);
  }
  // Both daemons write their log lines out within 100 ms (spec 80, buffered log sink).
  await sleep(LOG_FLUSH_MS);
  const lines = c.node.daemon.logs();
  const accepted = lines.find((l) => l.msg === 'pool load accepted' && l.pool_id === poolId);
  const at = (msg: string): number => logTime(lines, msg, poolId) - wall0;
  // The node may project twice (a first estimate, then a better one): the one its load was admitted with.
  const projected = lines.find(
    (l) => l.msg === 'memory projected' && l.pool_id === poolId && l.memory_bytes === accepted?.memory_bytes,
  );
  const orchLines = c.orchLogs();
  const placed = orchLines.find((l) => l.msg === 'task placed' && l.pool_id === poolId);
  const admitted = orchLines.find(
    (l) => l.msg === 'task admitted' && placed !== undefined && l.task_id === placed.task_id,
  );
  const orchAt = (l: JsonLine | undefined): number => (typeof l?.time === 'number' ? l.time - wall0 : Number.NaN);
  const logFile = (await readdir(join(c.node.runtimeDir, 'logs'))).find((f) => f.startsWith(`${poolId}-`));
  return {
    firstTokenMs: s.firstTokenMs,
    doneMs: s.doneMs,
    text: s.text,
    poolId,
    phases: {
      taskAdmitted: orchAt(admitted),
      loadAccepted: at('pool load accepted'),
      engineSpawned: at('engine spawned'),
      engineHealthy: at('engine healthy'),
      poolReady: at('pool ready'),
      taskPlaced: orchAt(placed),
    },
    engineListeningMs:
      logFile === undefined ? Number.NaN : await engineListeningMs(join(c.node.runtimeDir, 'logs', logFile)),
    projectedBytes: typeof accepted?.memory_bytes === 'number' ? accepted.memory_bytes : undefined,
    projectionMethod: typeof projected?.method === 'string' ? projected.method : undefined,
    projectionTerms: typeof projected?.human === 'string' ? projected.human : undefined,
    rssBytes: rss,
    reportedBytes: reported,
    unloadMs,
    argv,
  };
}

/**
 * The first load of a model (uncounted): `POST /v2/catalog/models/{id}/load`, waited until its pool
 * is ready (generating a synthetic model, or building the engine on a cold cache, can take minutes:
 * longer than a task's deadline), then unloaded. Answers the engine's argv and how long the load took.
 */
export async function firstLoad(
  c: OnDemandCluster,
  model: BenchModel,
  timeoutMs: number,
): Promise<{ argv: string[]; ms: number }> {
  const t0 = performance.now();
  const r = await httpJson('POST', `${c.orchUrl}/v2/catalog/models/${encodeURIComponent(model.ref)}/load`, {
    token: c.token,
  });
  if (r.status !== 202)
    throw new UnexpectedResponseError(
      `load of ${model.ref} answered ${r.status}: ${JSON.stringify(r.body).slice(0, 300)}`,
    );
  for (;;) {
    const pools = await fleetPoolsOf(c.orchUrl, c.token, model);
    const ready = pools.find((p) => p.ready);
    if (ready !== undefined) {
      const ms = performance.now() - t0;
      const argv = await processArgv(await enginePid(c.node.runtimeDir, ready.pool_id));
      await unloadModel(c.orchUrl, c.token, model);
      return { argv, ms };
    }
    const failed = pools.find((p) => p.state === 'failed');
    if (failed !== undefined)
      throw new BenchError(`the first load of ${model.ref} failed: ${JSON.stringify(failed).slice(0, 500)}`);
    if (c.node.daemon.state === 'exited')
      throw new ClusterNotReadyError(`pool-managerd exited:\n${c.node.daemon.tail()}`);
    if (performance.now() - t0 > timeoutMs)
      throw new ClusterNotReadyError(
        `${model.ref} not loaded after ${timeoutMs} ms: ${JSON.stringify(pools).slice(0, 500)}`,
      );
    await sleep(100);
  }
}

/** The node's engine argv spawned directly (its `--port` replaced), timed as {@link DirectSample}. */
export async function directSample(dir: string, argv: readonly string[], name: string): Promise<DirectSample> {
  const [binary, ...flags] = argv;
  if (binary === undefined) throw new BenchError('empty engine argv');
  const portIdx = flags.indexOf('--port');
  if (portIdx < 0) throw new BenchError(`engine flags have no --port: ${flags.join(' ')}`);
  const port = await freeLoopbackPort();
  const args = [...flags];
  args[portIdx + 1] = String(port);
  const base = `http://127.0.0.1:${port}`;
  const logPath = join(dir, `direct-engine-${name}.log`);
  const fd = openSync(logPath, 'w');
  const t0 = performance.now();
  const child = spawn(binary, args, { env: { PATH: process.env.PATH ?? '/usr/bin:/bin' }, stdio: ['ignore', fd, fd] });
  closeSync(fd);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  try {
    let healthMs = Number.NaN;
    while (Number.isNaN(healthMs)) {
      const ok = await request(`${base}/health`, { method: 'GET', reset: true }).then(
        async (r) => {
          await r.body.dump();
          return r.statusCode === 200;
        },
        () => false,
      );
      if (ok) healthMs = performance.now() - t0;
      else if (child.exitCode !== null) throw new BenchError(`engine exited with ${child.exitCode}`);
      else if (performance.now() - t0 > 60_000) throw new BenchError('engine not healthy within 60 s');
      else await sleep(2);
    }
    const s = await streamCompletion(base, coldBody(), { t0 });
    // The engine logs `listening on http` once its model is loaded, before /health answers 200.
    return {
      healthMs,
      firstTokenMs: s.firstTokenMs,
      text: s.text,
      engineListeningMs: await engineListeningMs(logPath),
    };
  } finally {
    child.kill('SIGTERM');
    await exited;
  }
}

/** A row of the projected-vs-measured table. */
export interface ProjectionRow {
  model: string;
  ref: string;
  projected_bytes: number;
  /** VmRSS right after a 1-token request (median over the cold samples when there are several). */
  rss_after_token_bytes: number;
  /** VmRSS after a request whose prompt fills a micro-batch. */
  rss_after_fill_bytes: number;
  fill_prompt_tokens: number;
  /** The engine's per-slot context (the fill prompt's limit). */
  slot_ctx: number;
  /** How the node projected (`memory projected` line's `method`), and its terms. */
  projection_method: string | undefined;
  projection_terms: string | undefined;
  /** The pool's memory_bytes on the node after the fill request. */
  reported_bytes: number | undefined;
  /** (projected − RSS after the fill) ÷ RSS after the fill, %. */
  error_pct: number;
}

/**
 * One more cold load of `model`, then a non-streamed request whose prompt fills a micro-batch, and
 * the engine's VmRSS and the node's `memory_bytes` after it.
 */
export async function projectionRow(c: OnDemandCluster, model: BenchModel): Promise<ProjectionRow> {
  let fill: { rss: number; tokens: number; reported: number | undefined; slotCtx: number } | undefined;
  const cold = await coldSample(c, model, async (poolId, pid) => {
    const slotCtx = (await nodePool(c.node.daemon.url, c.token, poolId))?.ctx ?? Number.NaN;
    if (!(slotCtx > 16)) throw new BenchError(`pool ${poolId} reports no usable slot context (${slotCtx})`);
    const r = await httpJson<{ usage?: { prompt_tokens?: number } }>('POST', `${c.orchUrl}/v1/completions`, {
      token: c.token,
      body: { model: model.alias, prompt: fillPrompt(slotCtx), max_tokens: 1, temperature: 0 },
    });
    if (r.status !== 200)
      throw new UnexpectedResponseError(`fill request on ${model.ref} answered ${r.status}: ${JSON.stringify(r.body)}`);
    fill = {
      rss: rssBytes(pid),
      tokens: r.body.usage?.prompt_tokens ?? Number.NaN,
      reported: (await nodePool(c.node.daemon.url, c.token, poolId))?.memory_bytes,
      slotCtx,
    };
  });
  if (fill === undefined) throw new BenchError('fill request not made');
  if (cold.projectedBytes === undefined)
    throw new BenchError(`the node logged no projection for ${model.ref}: was it not on the host?`);
  return {
    model: model.name,
    ref: model.ref,
    projected_bytes: cold.projectedBytes,
    rss_after_token_bytes: cold.rssBytes,
    rss_after_fill_bytes: fill.rss,
    fill_prompt_tokens: fill.tokens,
    slot_ctx: fill.slotCtx,
    projection_method: cold.projectionMethod,
    projection_terms: cold.projectionTerms,
    reported_bytes: fill.reported,
    error_pct: ((cold.projectedBytes - fill.rss) / fill.rss) * 100,
  };
}
