import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parsePrometheusText } from '@llama-orch/daemon-support';
import type { JsonLine } from '@llama-orch/daemon-support/daemon-launcher';
import { request, type Dispatcher } from 'undici';
import { BenchError, ClusterNotReadyError, UnexpectedResponseError } from '../errors.js';
import { httpJson } from './http.js';
import { SseParser } from './sse.js';

/**
 * Models on demand from a client's and an operator's side (spec 67, and pool-managerd's part in
 * spec 50): catalog registration and unloads on orchestratord, the node's pools, engine processes
 * and counters. Used by `pnpm bench lifecycle`.
 */

/** A catalog model as the benchmark names it: its ref and the one alias clients send. */
export interface BenchModel {
  /** Short name in the report (`s`, `m`, `a`…). */
  readonly name: string;
  readonly ref: string;
  readonly alias: string;
}

/** Registers `model` in orchestratord's catalog: never unloaded by the idle sweep, one copy, generation. */
export async function registerModel(orchUrl: string, token: string, model: BenchModel, ctx: number): Promise<void> {
  const r = await httpJson('POST', `${orchUrl}/v2/catalog/models`, {
    token,
    body: { ref: model.ref, aliases: [model.alias], ctx, slots: 1, idle_ttl_s: 0 },
  });
  if (r.status !== 201 && r.status !== 200)
    throw new UnexpectedResponseError(
      `POST /v2/catalog/models ${model.ref} answered ${r.status}: ${JSON.stringify(r.body).slice(0, 300)}`,
    );
}

/** orchestratord's `GET /v2/pools` item, the fields read here. */
export interface FleetPoolView {
  pool_id: string;
  node_id: string;
  state: string;
  ready: boolean;
  draining: boolean;
  models: string[];
  aliases?: string[];
  origin?: string;
  memory_bytes?: number;
}

/** The pools orchestratord lists for `model` (by its ref or alias). */
export async function fleetPoolsOf(orchUrl: string, token: string, model: BenchModel): Promise<FleetPoolView[]> {
  const r = await httpJson<{ pools: FleetPoolView[] }>('GET', `${orchUrl}/v2/pools`, { token });
  if (r.status !== 200) throw new UnexpectedResponseError(`GET /v2/pools answered ${r.status}`);
  return r.body.pools.filter((p) => p.models.includes(model.ref) || (p.aliases ?? []).includes(model.alias));
}

/** Waits until orchestratord lists no pool of `model`; ms waited. */
export async function waitModelGone(
  orchUrl: string,
  token: string,
  model: BenchModel,
  timeoutMs = 30_000,
): Promise<number> {
  const t0 = performance.now();
  while (performance.now() - t0 < timeoutMs) {
    if ((await fleetPoolsOf(orchUrl, token, model)).length === 0) return performance.now() - t0;
    await sleep(10);
  }
  throw new ClusterNotReadyError(`model ${model.ref} still listed in GET /v2/pools after ${timeoutMs} ms`);
}

/**
 * `POST /v2/catalog/models/{id}/unload` (drain deadline 0: nothing runs), then waits until
 * GET /v2/pools no longer lists the model; ms from the request to that.
 */
export async function unloadModel(orchUrl: string, token: string, model: BenchModel): Promise<number> {
  const t0 = performance.now();
  const r = await httpJson('POST', `${orchUrl}/v2/catalog/models/${encodeURIComponent(model.ref)}/unload`, {
    token,
    body: { deadline_ms: 0 },
  });
  if (r.status !== 202)
    throw new UnexpectedResponseError(
      `unload of ${model.ref} answered ${r.status}: ${JSON.stringify(r.body).slice(0, 300)}`,
    );
  await waitModelGone(orchUrl, token, model);
  return performance.now() - t0;
}

/** pool-managerd's `GET /v2/pools/{id}`, the fields read here. */
export interface NodePoolView {
  pool_id: string;
  state: string;
  ready: boolean;
  /** Per-slot context of the bound engine (its `/props`): what one request may use. */
  ctx: number;
  memory_bytes?: number;
  origin?: string;
}

export async function nodePool(pmUrl: string, token: string, poolId: string): Promise<NodePoolView | undefined> {
  const r = await httpJson<NodePoolView>('GET', `${pmUrl}/v2/pools/${encodeURIComponent(poolId)}`, { token });
  return r.status === 200 ? r.body : undefined;
}

/** The pid of pool `poolId`'s engine, from the node's PID file (`<runtime_dir>/pids/<pool>-<replica>.pid`). */
export async function enginePid(runtimeDir: string, poolId: string): Promise<number> {
  const dir = join(runtimeDir, 'pids');
  const file = (await readdir(dir)).find((f) => f.startsWith(`${poolId}-`) && f.endsWith('.pid'));
  if (file === undefined) throw new BenchError(`no PID file of pool ${poolId} in ${dir}`);
  const parsed = JSON.parse(await readFile(join(dir, file), 'utf8')) as { pid?: unknown };
  if (typeof parsed.pid !== 'number') throw new BenchError(`PID file ${file} has no pid`);
  return parsed.pid;
}

/** A process's argv (`/proc/<pid>/cmdline`). */
export async function processArgv(pid: number): Promise<string[]> {
  return (await readFile(`/proc/${pid}/cmdline`, 'utf8')).split('\0').filter((a) => a !== '');
}

/** Whether a process is still running (not gone, not a zombie). */
export async function processAlive(pid: number): Promise<boolean> {
  try {
    const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
    const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    return state !== 'Z' && state !== 'X';
  } catch {
    return false;
  }
}

/** pool-managerd's load and unload counters (`llorch_pool_loads_total{outcome}`, `llorch_pool_unloads_total`). */
export interface LoadCounters {
  readonly loads: Readonly<Record<string, number>>;
  readonly unloads: number;
}

export async function loadCounters(pmUrl: string): Promise<LoadCounters> {
  const res = await request(`${pmUrl}/metrics`, { method: 'GET' });
  const text = await res.body.text();
  if (res.statusCode !== 200) throw new UnexpectedResponseError(`GET /metrics answered ${res.statusCode}`);
  const families = parsePrometheusText(text).families;
  const loads: Record<string, number> = {};
  for (const s of families.find((f) => f.name === 'llorch_pool_loads_total')?.samples ?? [])
    loads[s.labels.outcome ?? '?'] = s.value;
  const unloads = families.find((f) => f.name === 'llorch_pool_unloads_total')?.samples[0]?.value ?? 0;
  return { loads, unloads };
}

/** `after − before`, per outcome. */
export function countersSince(before: LoadCounters, after: LoadCounters): LoadCounters {
  const loads: Record<string, number> = {};
  for (const k of new Set([...Object.keys(before.loads), ...Object.keys(after.loads)]))
    loads[k] = (after.loads[k] ?? 0) - (before.loads[k] ?? 0);
  return { loads, unloads: after.unloads - before.unloads };
}

/** The wall-clock time (pino `time`, ms) of the first line with `msg` (and `pool_id`, when given). */
export function logTime(lines: readonly JsonLine[], msg: string, poolId?: string): number {
  const l = lines.find((x) => x.msg === msg && (poolId === undefined || x.pool_id === poolId));
  return typeof l?.time === 'number' ? l.time : Number.NaN;
}

/** One streamed `POST /v1/completions` as the client saw it. */
export interface StreamedCompletion {
  /** Request → first frame with a choice (the token; 1-token completions have one), ms. */
  firstTokenMs: number;
  /** Request → `data: [DONE]`, ms. */
  doneMs: number;
  text: string;
}

/**
 * Streams `POST <base>/v1/completions` (the engine itself, or orchestratord's door with `token`)
 * and times its first choice frame. Throws on any status but 200 or a stream without one.
 */
export async function streamCompletion(
  base: string,
  body: Record<string, unknown>,
  opts: { token?: string; dispatcher?: Dispatcher; t0?: number } = {},
): Promise<StreamedCompletion> {
  const t0 = opts.t0 ?? performance.now();
  const res = await request(`${base}/v1/completions`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'text/event-stream',
      ...(opts.token !== undefined ? { authorization: `Bearer ${opts.token}` } : {}),
    },
    body: JSON.stringify({ ...body, stream: true }),
    ...(opts.dispatcher !== undefined ? { dispatcher: opts.dispatcher } : {}),
  });
  if (res.statusCode !== 200)
    throw new UnexpectedResponseError(
      `POST ${base}/v1/completions answered ${res.statusCode}: ${(await res.body.text()).slice(0, 500)}`,
    );
  const parser = new SseParser();
  let first = Number.NaN;
  let done = Number.NaN;
  let text = '';
  res.body.setEncoding('utf8');
  for await (const chunk of res.body as AsyncIterable<string>) {
    const at = performance.now();
    for (const f of parser.feed(chunk)) {
      if (f.data === '[DONE]') {
        done = at;
        continue;
      }
      const parsed = JSON.parse(f.data) as { choices?: Array<{ text?: string }>; error?: unknown };
      if (parsed.error !== undefined)
        throw new UnexpectedResponseError(`stream from ${base} ended in an error: ${f.data.slice(0, 300)}`);
      const choice = parsed.choices?.[0];
      if (choice === undefined) continue;
      if (Number.isNaN(first)) first = at;
      text += choice.text ?? '';
    }
  }
  if (Number.isNaN(first)) throw new UnexpectedResponseError(`stream from ${base} carried no choice`);
  return { firstTokenMs: first - t0, doneMs: (Number.isNaN(done) ? performance.now() : done) - t0, text };
}
