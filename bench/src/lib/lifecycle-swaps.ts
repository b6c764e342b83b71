import { setTimeout as sleep } from 'node:timers/promises';
import type { JsonLine } from '@llama-orch/daemon-support/daemon-launcher';
import { Agent } from 'undici';
import { httpJson } from './http.js';
import { countersSince, loadCounters, type BenchModel, type LoadCounters } from './on-demand.js';
import { PROMPT } from './lifecycle-cold.js';

/**
 * `pnpm bench lifecycle`, swaps under alternating load: requests naming models A, B, C in turn,
 * one client at a time and three at once, against a node whose budget fits two of them (every
 * model not loaded is a load, and one that does not fit an eviction), and against a node that
 * serves each from a YAML pool of its own (always loaded).
 */

/** How long a client keeps retrying a retriable refusal before it counts the request failed. */
export const GIVE_UP_MS = 60_000;
/** Tokens each request asks for: long enough that a copy is busy while another model's load is decided. */
export const SWAP_MAX_TOKENS = 64;

export type SwapSetup = 'on-demand' | 'static';
export type SwapMode = 'sequential' | 'concurrent';

/** One client request: request → answer, retries after a retriable refusal (Retry-After) included. */
export interface SwapRequest {
  model: string;
  client: number;
  /** First attempt → final answer, ms. */
  ms: number;
  ok: boolean;
  attempts: number;
  /** Tokens generated (the answer's `usage.completion_tokens`). */
  tokens?: number;
  /** Refusals answered before the final answer, by error code (`INSUFFICIENT_MEMORY` …). */
  refusals: Record<string, number>;
  /** Why it failed: the final status and code, or the transport error. */
  error?: string;
}

export interface SwapBlock {
  setup: SwapSetup;
  mode: SwapMode;
  round: number;
  wallMs: number;
  requests: SwapRequest[];
  /** The node's load and unload counters over the block (on-demand only). */
  counters?: LoadCounters;
  /** orchestratord's catalog lines over the block (on-demand only): evictions, loads refused by every node, loads by how they ended. */
  catalog?: CatalogLines;
}

export interface CatalogLines {
  evictions: number;
  /** Evictions of a copy with a task in flight on it (placed, not ended, by orchestratord's own lines). */
  evicted_busy: number;
  refused: number;
  /** Loads that found no room and nothing evictable, so the model's tasks stayed queued (`model waits for room`). */
  room_waits: number;
  started: number;
  ended: Record<string, number>;
}

/** Counts orchestratord's catalog lines logged from `fromWall` to `toWall` (pino time, ms). */
export function catalogLines(lines: readonly JsonLine[], fromWall: number, toWall: number): CatalogLines {
  const out: CatalogLines = { evictions: 0, evicted_busy: 0, refused: 0, room_waits: 0, started: 0, ended: {} };
  // Tasks in flight per pool, in log order (a task's `task placed` to its `task ended`).
  const running = new Map<string, Set<string>>();
  const poolOf = new Map<string, string>();
  for (const l of lines) {
    if (typeof l.time !== 'number' || l.time > toWall) continue;
    const task = typeof l.task_id === 'string' ? l.task_id : undefined;
    const pool = typeof l.pool_id === 'string' ? l.pool_id : undefined;
    if (l.msg === 'task placed' && task !== undefined && pool !== undefined) {
      poolOf.set(task, pool);
      running.set(pool, (running.get(pool) ?? new Set<string>()).add(task));
    } else if (l.msg === 'task ended' && task !== undefined) {
      const p = poolOf.get(task);
      if (p !== undefined) running.get(p)?.delete(task);
    }
    if (l.time < fromWall) continue;
    if (l.msg === 'model copy unloading' && typeof l.reason === 'string' && l.reason.startsWith('evicted')) {
      out.evictions += 1;
      if (pool !== undefined && (running.get(pool)?.size ?? 0) > 0) out.evicted_busy += 1;
    } else if (l.msg === 'model load refused') out.refused += 1;
    else if (l.msg === 'model waits for room') out.room_waits += 1;
    else if (l.msg === 'model load started') out.started += 1;
    else if (l.msg === 'model load ended') {
      const e = typeof l.ending === 'string' ? l.ending : '?';
      out.ended[e] = (out.ended[e] ?? 0) + 1;
    }
  }
  return out;
}

export interface SwapTarget {
  readonly setup: SwapSetup;
  readonly orchUrl: string;
  readonly token: string;
  /** The node's base URL (its /metrics), on-demand only. */
  readonly nodeUrl?: string;
  /** orchestratord's log lines so far, on-demand only. */
  readonly orchLogs?: () => JsonLine[];
}

const RETRIABLE = new Set([503, 429]);

/** A non-streamed `POST /v1/completions` naming `model`, retried while refused with a Retry-After (each refusal counted). */
async function clientRequest(t: SwapTarget, model: BenchModel, client: number, agent: Agent): Promise<SwapRequest> {
  const t0 = performance.now();
  const refusals: Record<string, number> = {};
  let attempts = 0;
  for (;;) {
    attempts += 1;
    let status: number;
    let code: string;
    let retryAfter: string | string[] | undefined;
    let tokens: number | undefined;
    try {
      const r = await httpJson<{ error?: { code?: string }; usage?: { completion_tokens?: number } }>(
        'POST',
        `${t.orchUrl}/v1/completions`,
        {
          token: t.token,
          dispatcher: agent,
          body: { model: model.alias, prompt: PROMPT, max_tokens: SWAP_MAX_TOKENS, temperature: 0 },
        },
      );
      status = r.status;
      code = r.body?.error?.code ?? '';
      retryAfter = r.headers['retry-after'];
      tokens = r.body?.usage?.completion_tokens;
    } catch (err) {
      const e = err as NodeJS.ErrnoException;
      return {
        model: model.name,
        client,
        ms: performance.now() - t0,
        ok: false,
        attempts,
        refusals,
        error: `transport ${e.code ?? e.message}`,
      };
    }
    if (status === 200)
      return {
        model: model.name,
        client,
        ms: performance.now() - t0,
        ok: true,
        attempts,
        refusals,
        ...(tokens !== undefined ? { tokens } : {}),
      };
    const waitS = Number(Array.isArray(retryAfter) ? retryAfter[0] : retryAfter);
    const elapsed = performance.now() - t0;
    if (!RETRIABLE.has(status) || !Number.isFinite(waitS) || elapsed + waitS * 1000 > GIVE_UP_MS) {
      return {
        model: model.name,
        client,
        ms: elapsed,
        ok: false,
        attempts,
        refusals,
        error: `${status} ${code}${Number.isFinite(waitS) ? '' : ' (no Retry-After)'}`,
      };
    }
    refusals[code] = (refusals[code] ?? 0) + 1;
    await sleep(waitS * 1000);
  }
}

/**
 * One block of requests: `sequential` = one client asking for models[0], [1], [2], [0]… `perClient`
 * times; `concurrent` = three clients at once, client k asking for models[k], [k+1]… `perClient`
 * times each (so at any moment the three ask for three different models).
 */
export async function swapBlock(
  t: SwapTarget,
  models: readonly BenchModel[],
  mode: SwapMode,
  perClient: number,
  round: number,
): Promise<SwapBlock> {
  const agent = new Agent({ headersTimeout: 180_000, bodyTimeout: 180_000 });
  const before = t.nodeUrl !== undefined ? await loadCounters(t.nodeUrl) : undefined;
  const t0 = performance.now();
  const wall0 = performance.timeOrigin + t0;
  const clients = mode === 'sequential' ? 1 : 3;
  const requests: SwapRequest[] = [];
  try {
    await Promise.all(
      Array.from({ length: clients }, async (_, k) => {
        for (let j = 0; j < perClient; j++) {
          const model = models[(k + j) % models.length] as BenchModel;
          requests.push(await clientRequest(t, model, k, agent));
        }
      }),
    );
  } finally {
    await agent.close();
  }
  const wallMs = performance.now() - t0;
  // The last eviction's unload may still be reported: counters read once the node is quiet a moment.
  await sleep(300);
  const counters =
    before !== undefined && t.nodeUrl !== undefined ? countersSince(before, await loadCounters(t.nodeUrl)) : undefined;
  const catalog = t.orchLogs !== undefined ? catalogLines(t.orchLogs(), wall0, Date.now()) : undefined;
  return {
    setup: t.setup,
    mode,
    round,
    wallMs,
    requests,
    ...(counters !== undefined ? { counters } : {}),
    ...(catalog !== undefined ? { catalog } : {}),
  };
}

/** What the report says of the blocks of one setup and mode. */
export interface SwapSummary {
  requests: number;
  succeeded: number;
  /** Succeeded at the first attempt. */
  first_try: number;
  /** Retriable refusals answered before a final answer, by code. */
  refusals: Record<string, number>;
  /** Failed requests by their final answer. */
  failures: Record<string, number>;
  /** Latency of the successful requests, ms (retries included). */
  ms: number[];
  /** Tokens the successful requests generated, in all. */
  tokens: number;
  /** Loads that reached ready, refused and failed on the node, and unloads (on-demand). */
  loads_ready?: number;
  loads_other?: Record<string, number>;
  unloads?: number;
  /** orchestratord's evictions and the loads it found no room for (every node refused, before evicting). */
  evictions?: number;
  evicted_busy?: number;
  orch_loads_refused?: number;
  room_waits?: number;
  wall_ms: number;
}

export function summarizeBlocks(blocks: readonly SwapBlock[]): SwapSummary {
  const out: SwapSummary = {
    requests: 0,
    succeeded: 0,
    first_try: 0,
    refusals: {},
    failures: {},
    ms: [],
    tokens: 0,
    wall_ms: 0,
  };
  for (const b of blocks) {
    out.wall_ms += b.wallMs;
    for (const r of b.requests) {
      out.requests += 1;
      for (const [code, n] of Object.entries(r.refusals)) out.refusals[code] = (out.refusals[code] ?? 0) + n;
      if (r.ok) {
        out.succeeded += 1;
        if (r.attempts === 1) out.first_try += 1;
        out.ms.push(r.ms);
        out.tokens += r.tokens ?? 0;
      } else {
        const why = r.error ?? 'unknown';
        out.failures[why] = (out.failures[why] ?? 0) + 1;
      }
    }
    if (b.catalog !== undefined) {
      out.evictions = (out.evictions ?? 0) + b.catalog.evictions;
      out.evicted_busy = (out.evicted_busy ?? 0) + b.catalog.evicted_busy;
      out.room_waits = (out.room_waits ?? 0) + b.catalog.room_waits;
      out.orch_loads_refused = (out.orch_loads_refused ?? 0) + b.catalog.refused;
    }
    if (b.counters !== undefined) {
      out.loads_ready = (out.loads_ready ?? 0) + (b.counters.loads.ready ?? 0);
      out.unloads = (out.unloads ?? 0) + b.counters.unloads;
      for (const [k, v] of Object.entries(b.counters.loads)) {
        if (k === 'ready' || v === 0) continue;
        out.loads_other = { ...(out.loads_other ?? {}), [k]: (out.loads_other?.[k] ?? 0) + v };
      }
    }
  }
  return out;
}
