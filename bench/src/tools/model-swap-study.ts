#!/usr/bin/env node
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, openSync, closeSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Agent, Client, request, type Dispatcher } from 'undici';
import { cpuSeconds } from '../lib/proc.js';
import { benchPaths } from '../lib/repo.js';
import { summarize } from '../lib/stats.js';
import { numberOption } from '../lib/tool-args.js';

/**
 * `node bench/dist/tools/model-swap-study.js [--trials=3] [--requests=300] [--engine=PATH] [--keep]`:
 * issue 40, "router mode or one process per model: decide by measurement". Compares llama-server's
 * router mode (started without -m: one parent that spawns one child llama-server per model, routes
 * `POST /models/load`, `/models/unload`, `GET /models`, `/models/sse`, requests routed by their
 * `model` field) with pool-managerd's way (one llama-server per model, spawned and supervised
 * separately), on three synthetic models generated into a temp dir (removed at the end unless --keep):
 *   s  synthetic:llama?ctx=4096                                          ~9 MB F32
 *   m  synthetic:llama?layers=4&embd=512&heads=8&ff=2048&ctx=4096&type=f16   ~67 MB
 *   l  synthetic:llama?layers=8&embd=1024&heads=16&ff=4096&ctx=4096&type=f16 ~330 MB
 * Every engine (direct or router child) runs with `-c 4096 -np 1 -t 1 --no-webui --metrics`, a
 * scrubbed environment, and LLAMA_CACHE/HF_HUB_CACHE pointed at an empty dir (so the router lists
 * only the --models-dir models). The files were just written, so they load from the page cache:
 * load time is mmap + the --fit dry run + warm-up, not disk reads.
 *
 * Prints four tables: (1) load: request → first token of a 1-token completion (direct: spawn →
 * /health 200 → completion; router: POST /models/load → GET /models says `loaded` → completion, and
 * "autoload": a completion naming an unloaded model); (2) unload: time to the engine's exit and the
 * RSS given back (direct: SIGTERM; router: POST /models/unload, parent + children RSS before/after);
 * (3) failure isolation: SIGKILL of m's engine while a long request runs on it — what its client
 * gets, whether s and l keep answering, what the router does; then SIGKILL of the router parent;
 * (4) the router's proxy hop: sequential 1-token completions to s, direct and through the router,
 * interleaved. A diagnostic: nothing is written to bench/results.
 *
 * bench does not depend on @llama-orch/model-provisioner, so the generator is loaded from that
 * package's build (packages/model-provisioner/dist) at run time: run `pnpm build` first. The engine is
 * the test engine the suites build (`<cache>/engines/<fingerprint>/llama-server`, the newest), or --engine.
 *
 * Findings, 3 runs of --trials=3 --requests=300 (2-core CPU box shared with other test runs; llama.cpp
 * de3ff81 built by the engine provisioner; router mode is compiled in: LLAMA_SUBPROCESS defaults to ON,
 * CMakeLists.txt:145, and the provisioner does not turn it off). Medians, ranges over the runs:
 * - Load (request → first token): the router spawns the same binary with the same flags, so it costs
 *   the same. s: 92–299 ms direct vs 84–146 (/models/load) and 89–110 (autoload); m: 133–230 vs 133–177
 *   and 128–157; l: 309–591 vs 306–402 and 300–452 (the 299 and 591 come from a run whose direct phase
 *   ran before the router phase, under other load; the tool now interleaves them). `POST /models/load`
 *   answers in 1–5 ms, before the load: readiness comes from `GET /models` (status.value `loaded`) or
 *   `GET /models/sse`.
 * - Unload: engine gone in 7–16 ms (router: exit command on the child's stdin) vs 15–38 ms (SIGTERM);
 *   GET /models says `unloaded` 7–77 ms after the request (its monitor polls a child whose output
 *   closed every 50 ms). Memory given back is the child's whole RSS either way (s 31.7 MiB, m 117.2,
 *   l 468.7; anonymous 11.8 / 42.2 / 138.5, the rest is the mmapped model, left in the page cache); the
 *   parent keeps 11.5 MiB idle, 12.3 MiB with 3 children.
 * - SIGKILL of m's engine: its in-flight request fails either way (direct: socket closed; router: 500
 *   `proxy error: Failed to read connection`) within ~5 ms; s and l keep serving (6/6 both ways). The
 *   router marks m `unloaded` with exit_code 1, failed: true (a signal is reported as exit code 1:
 *   vendor/sheredom/subprocess.h:1946-1950) within 5–14 ms and does NOT respawn it; the next request for m
 *   autoloads it (130–310 ms). SIGKILL of the router parent: every child exits within 5–7 ms (stdin EOF →
 *   exit(1), server-models.cpp:1802): one process takes all models down.
 * - Proxy hop, 1-token completions on s: p50 1.27–1.29 ms direct keep-alive, 1.58–1.62 direct new
 *   connection, 2.07–2.19 router; the hop alone +0.49–0.57 ms p50 (+0.75–1.87 p90), +0.80–0.90 ms p50
 *   against keep-alive since the router answers every proxied request with `Connection: close` (it
 *   streams the child's answer, server-models.cpp:2490); parent CPU 355–430 µs per proxied request
 *   (2 runs; a new thread and a new loopback connection each, server-models.cpp:2598).
 */

const args = process.argv.slice(2);
const trials = numberOption(args, 'trials', 3);
const requests = numberOption(args, 'requests', 300);
const keep = args.includes('--keep');
const engineArg = args.find((a) => a.startsWith('--engine='))?.slice('--engine='.length);

const MODELS = [
  { name: 's', query: 'ctx=4096' },
  { name: 'm', query: 'layers=4&embd=512&heads=8&ff=2048&ctx=4096&type=f16' },
  { name: 'l', query: 'layers=8&embd=1024&heads=16&ff=4096&ctx=4096&type=f16' },
] as const;
type ModelName = (typeof MODELS)[number]['name'];
const ENGINE_FLAGS = ['-c', '4096', '-np', '1', '-t', '1', '--no-webui', '--metrics'];
const PROMPT = 'Once upon a time';
const POLL_MS = 5;
const LOAD_TIMEOUT_MS = 120_000;

/** The part of @llama-orch/model-provisioner this tool uses. */
interface SyntheticGenerator {
  parseSyntheticParams(query: string): unknown;
  writeSyntheticModel(params: unknown, outPath: string, vocabPath: string): Promise<{ size_bytes: number }>;
}

const paths = benchPaths(process.env);
/** Keep-alive, for direct engines. The router answers every proxied request with `Connection: close`. */
const agent = new Agent({ keepAliveTimeout: 10_000, connections: 16 });
const spawned: ChildProcess[] = [];

function say(m: string): void {
  process.stderr.write(`[model-swap-study] ${m}\n`);
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Newest `<cache>/engines/<fp>/llama-server`. */
function findEngine(): string {
  if (engineArg !== undefined) return engineArg;
  const dir = join(paths.cacheDir, 'engines');
  const found = readdirSync(dir)
    .map((fp) => join(dir, fp, 'llama-server'))
    .filter((p) => existsSync(p))
    .sort((a, b) => statSync(b).mtimeMs - statSync(a).mtimeMs);
  if (found[0] === undefined) throw new Error(`no llama-server under ${dir}: run the test suite's global setup once`);
  return found[0];
}

function findVocab(): string {
  const dir = join(paths.cacheDir, 'sources');
  for (const commit of readdirSync(dir)) {
    const p = join(dir, commit, 'models', 'ggml-vocab-llama-spm.gguf');
    if (existsSync(p)) return p;
  }
  throw new Error(`no llama.cpp source with models/ggml-vocab-llama-spm.gguf under ${dir}`);
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as { port: number }).port;
      srv.close(() => resolve(port));
    });
  });
}

/** llama-server's env minus what silently changes it (as pool-managerd's scrubEngineEnv), plus an empty HF cache. */
function engineEnv(hfCache: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (v === undefined || k.startsWith('LLAMA_ARG_') || k === 'LLAMA_API_KEY' || k.startsWith('AIP_')) continue;
    out[k] = v;
  }
  return { ...out, LLAMA_CACHE: hfCache, HF_HUB_CACHE: hfCache };
}

interface Proc {
  readonly pid: number;
  readonly child: ChildProcess;
  readonly exited: Promise<void>;
}

function start(bin: string, argv: string[], env: Record<string, string>, logPath: string): Proc {
  const fd = openSync(logPath, 'a');
  const child = spawn(bin, argv, { env, stdio: ['ignore', fd, fd] });
  closeSync(fd);
  spawned.push(child);
  if (child.pid === undefined) throw new Error(`could not spawn ${bin}`);
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  return { pid: child.pid, child, exited };
}

/** State letter of /proc/<pid>/stat; undefined once the process is gone. */
function procState(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
  } catch {
    return undefined;
  }
}
const alive = (pid: number): boolean => {
  const s = procState(pid);
  return s !== undefined && s !== 'Z' && s !== 'X';
};

/** Resident memory: total and anonymous (file-backed pages of the mmapped model stay in the page cache). */
function memory(pid: number): { rss: number; anon: number } {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = (key: string): number => Number(new RegExp(`${key}:\\s+(\\d+) kB`).exec(status)?.[1] ?? 0) * 1024;
    return { rss: kb('VmRSS'), anon: kb('RssAnon') };
  } catch {
    return { rss: 0, anon: 0 };
  }
}

/** Live child processes of `pid`, by the model name in their `--alias`. */
function routerChildren(pid: number): Map<string, number> {
  const out = new Map<string, number>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (Number(fields[1]) !== pid || !alive(Number(entry))) continue;
      const argv = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0');
      const i = argv.indexOf('--alias');
      out.set(i >= 0 ? (argv[i + 1] ?? '?') : '?', Number(entry));
    } catch {
      // the process exited while /proc was read
    }
  }
  return out;
}

function routerMemory(parent: number): { rss: number; anon: number } {
  let { rss, anon } = memory(parent);
  for (const pid of routerChildren(parent).values()) {
    const m = memory(pid);
    rss += m.rss;
    anon += m.anon;
  }
  return { rss, anon };
}

async function waitFor(
  what: string,
  check: () => Promise<boolean> | boolean,
  timeoutMs = LOAD_TIMEOUT_MS,
): Promise<number> {
  const deadline = performance.now() + timeoutMs;
  while (performance.now() < deadline) {
    if (await check()) return performance.now();
    await sleep(POLL_MS);
  }
  throw new Error(`timed out waiting for ${what}`);
}

interface Reply {
  status: number;
  body: string;
  error?: string;
}

/** One request: over the keep-alive agent, or (`fresh`) over a new connection closed afterwards. */
async function send(url: string, fresh: boolean, body?: unknown): Promise<Reply> {
  const client: Dispatcher = fresh ? new Client(new URL(url).origin) : agent;
  try {
    const res = await request(url, {
      method: body === undefined ? 'GET' : 'POST',
      ...(body === undefined ? {} : { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }),
      dispatcher: client,
    });
    return { status: res.statusCode, body: await res.body.text() };
  } catch (err) {
    return { status: 0, body: '', error: (err as NodeJS.ErrnoException).code ?? (err as Error).message };
  } finally {
    if (fresh) await client.close();
  }
}

/** The router closes its connection after every answer, so it always gets a fresh one. */
const post = (url: string, body: unknown, fresh = false): Promise<Reply> => send(url, fresh, body);
const get = (url: string, fresh = false): Promise<Reply> => send(url, fresh);

/** A 1-token completion (`model` only through the router, which always gets a fresh connection). */
const complete = (
  base: string,
  model?: string,
  nPredict = 1,
  extra: Record<string, unknown> = {},
  fresh = model !== undefined,
): Promise<Reply> =>
  post(
    `${base}/completion`,
    {
      prompt: PROMPT,
      n_predict: nPredict,
      cache_prompt: false,
      ...(model === undefined ? {} : { model }),
      ...extra,
    },
    fresh,
  );

async function mustComplete(base: string, model?: string, fresh = model !== undefined): Promise<void> {
  const r = await complete(base, model, 1, {}, fresh);
  if (r.status !== 200)
    throw new Error(
      `completion on ${base} (${model ?? 'direct'}) answered ${r.status} ${r.error ?? r.body.slice(0, 300)}`,
    );
}

interface RouterModel {
  id: string;
  status: { value: string; exit_code?: number; failed?: boolean };
}
async function routerModels(base: string): Promise<Map<string, RouterModel['status']>> {
  const r = await get(`${base}/models`, true);
  const list = r.status === 200 ? (JSON.parse(r.body) as { data: RouterModel[] }).data : [];
  return new Map(list.map((m) => [m.id, m.status]));
}
const routerStatus = async (base: string, model: string): Promise<string | undefined> =>
  (await routerModels(base)).get(model)?.value;

// ---------------------------------------------------------------------------------------------
// the two ways of running a model

interface Direct {
  readonly base: string;
  readonly proc: Proc;
}

async function spawnDirect(bin: string, model: string, env: Record<string, string>, log: string): Promise<Direct> {
  const port = await freePort();
  const proc = start(bin, ['-m', model, '--host', '127.0.0.1', '--port', String(port), ...ENGINE_FLAGS], env, log);
  return { base: `http://127.0.0.1:${port}`, proc };
}

const healthy = async (base: string, fresh = false): Promise<boolean> =>
  (await get(`${base}/health`, fresh)).status === 200;

async function startRouter(bin: string, modelsDir: string, env: Record<string, string>, log: string): Promise<Direct> {
  const port = await freePort();
  const proc = start(
    bin,
    ['--host', '127.0.0.1', '--port', String(port), '--models-dir', modelsDir, '--models-max', '0', ...ENGINE_FLAGS],
    env,
    log,
  );
  const base = `http://127.0.0.1:${port}`;
  await waitFor('the router /health', () => healthy(base, true));
  return { base, proc };
}

// ---------------------------------------------------------------------------------------------
// measurements

type Samples = Record<string, number[]>;
/** What every direct spawn needs. */
interface Run {
  readonly bin: string;
  readonly files: Record<ModelName, string>;
  readonly env: Record<string, string>;
  readonly log: string;
}
const push = (s: Samples, key: string, v: number): void => {
  (s[key] ??= []).push(v);
};

/** (1)+(2) direct, one model: spawn → /health → first token; SIGTERM → exit; RSS given back = its RSS. */
async function directOnce(name: ModelName, run: Run, s: Samples): Promise<void> {
  const t0 = performance.now();
  const d = await spawnDirect(run.bin, run.files[name], run.env, run.log);
  const tHealth = await waitFor(`${name} /health`, () => healthy(d.base));
  await mustComplete(d.base);
  const tFirst = performance.now();
  push(s, `${name}.health`, tHealth - t0);
  push(s, `${name}.first`, tFirst - t0);
  const mem = memory(d.proc.pid);
  push(s, `${name}.rss`, mem.rss);
  push(s, `${name}.anon`, mem.anon);
  const u0 = performance.now();
  d.proc.child.kill('SIGTERM');
  await d.proc.exited;
  push(s, `${name}.unload`, performance.now() - u0);
}

/** (2) router: /models/unload → the child's exit and GET /models `unloaded`; parent + children RSS before/after. */
async function routerUnload(router: Direct, name: ModelName, s: Samples): Promise<void> {
  const parent = router.proc.pid;
  const child = routerChildren(parent).get(name);
  const before = routerMemory(parent);
  const u0 = performance.now();
  const r = await post(`${router.base}/models/unload`, { model: name }, true);
  if (r.status !== 200) throw new Error(`/models/unload ${name}: ${r.status} ${r.body}`);
  const tExit = await waitFor(`${name} child exit`, () => child === undefined || !alive(child));
  const tStatus = await waitFor(`${name} unloaded`, async () => (await routerStatus(router.base, name)) === 'unloaded');
  const after = routerMemory(parent);
  push(s, `${name}.unload`, tExit - u0);
  push(s, `${name}.unloadStatus`, tStatus - u0);
  push(s, `${name}.rssBack`, before.rss - after.rss);
  push(s, `${name}.anonBack`, before.anon - after.anon);
}

/** (1)+(2) router, one model: POST /models/load, then autoload (a completion naming it); unloaded after each. */
async function routerOnce(router: Direct, name: ModelName, s: Samples): Promise<void> {
  const t0 = performance.now();
  const r = await post(`${router.base}/models/load`, { model: name }, true);
  if (r.status !== 200) throw new Error(`/models/load ${name}: ${r.status} ${r.body}`);
  push(s, `${name}.loadReturn`, performance.now() - t0);
  const tLoaded = await waitFor(`${name} loaded`, async () => (await routerStatus(router.base, name)) === 'loaded');
  await mustComplete(router.base, name);
  push(s, `${name}.loaded`, tLoaded - t0);
  push(s, `${name}.first`, performance.now() - t0);
  const child = routerChildren(router.proc.pid).get(name);
  if (child !== undefined) push(s, `${name}.childRss`, memory(child).rss);
  await routerUnload(router, name, s);

  const a0 = performance.now();
  await mustComplete(router.base, name);
  push(s, `${name}.autoload`, performance.now() - a0);
  await routerUnload(router, name, s);
}

/** (1)+(2): per trial and model, direct then router, so both see the same machine load. */
async function loadUnload(run: Run, router: Direct): Promise<{ direct: Samples; router: Samples }> {
  const out = { direct: {} as Samples, router: {} as Samples };
  for (let t = 0; t < trials; t++) {
    for (const { name } of MODELS) {
      await directOnce(name, run, out.direct);
      await routerOnce(router, name, out.router);
    }
  }
  return out;
}

interface Isolation {
  inflight: string;
  inflightMs: number;
  others: string;
  detectMs: number;
  statusAfter: string;
  restarted: string;
  nextRequest: string;
}

function describe(r: Reply): string {
  return r.status === 0 ? `transport error ${r.error}` : `${r.status} ${r.body.replace(/\s+/g, ' ').slice(0, 90)}`;
}

/**
 * A long generation on m; `kill` SIGKILLs m's engine 300 ms in, `noticed` (started right then)
 * resolves when the supervisor side sees it; then s and l get 3 requests each.
 */
async function isolation(
  inflightOn: () => Promise<Reply>,
  kill: () => void,
  noticed: () => Promise<number>,
  others: () => Promise<boolean>[],
): Promise<{ inflight: string; inflightMs: number; others: string; detectMs: number }> {
  const running = inflightOn();
  await sleep(300);
  const killedAt = performance.now();
  kill();
  const seen = noticed();
  const r = await running;
  const inflightMs = performance.now() - killedAt;
  let ok = 0;
  let n = 0;
  for (let i = 0; i < 3; i++) {
    for (const p of others()) {
      n++;
      if (await p) ok++;
    }
  }
  return { inflight: describe(r), inflightMs, others: `${ok}/${n} ok`, detectMs: (await seen) - killedAt };
}

const LONG = { ignore_eos: true, n_predict: 3000 };

async function directIsolation(run: Run): Promise<Isolation> {
  const engines = {} as Record<ModelName, Direct>;
  for (const { name } of MODELS) engines[name] = await spawnDirect(run.bin, run.files[name], run.env, run.log);
  for (const { name } of MODELS) await waitFor(`${name} /health`, () => healthy(engines[name].base));
  const ok = async (base: string): Promise<boolean> => (await complete(base)).status === 200;
  const res = await isolation(
    () => complete(engines.m.base, undefined, LONG.n_predict, LONG),
    () => engines.m.proc.child.kill('SIGKILL'),
    () => engines.m.proc.exited.then(() => performance.now()),
    () => [ok(engines.s.base), ok(engines.l.base)],
  );
  const next = await complete(engines.m.base);
  for (const { name } of MODELS) {
    engines[name].proc.child.kill('SIGTERM');
    await engines[name].proc.exited;
  }
  return {
    ...res,
    statusAfter: 'process gone (the supervisor sees the exit: signal SIGKILL)',
    restarted: 'only if the supervisor restarts it (pool-managerd does)',
    nextRequest: describe(next),
  };
}

async function routerIsolation(router: Direct): Promise<Isolation> {
  for (const { name } of MODELS) await mustComplete(router.base, name);
  const victim = routerChildren(router.proc.pid).get('m');
  if (victim === undefined) throw new Error('no router child for m');
  const ok = async (name: string): Promise<boolean> => (await complete(router.base, name)).status === 200;
  const res = await isolation(
    () => complete(router.base, 'm', LONG.n_predict, LONG),
    () => process.kill(victim, 'SIGKILL'),
    () => waitFor('m leaves loaded', async () => (await routerStatus(router.base, 'm')) !== 'loaded', 10_000),
    () => [ok('s'), ok('l')],
  );
  const st = (await routerModels(router.base)).get('m');
  await sleep(2000);
  const again = routerChildren(router.proc.pid).get('m');
  const n0 = performance.now();
  const next = await complete(router.base, 'm');
  const nextMs = performance.now() - n0;
  return {
    ...res,
    statusAfter: `GET /models: ${JSON.stringify(st ? { value: st.value, exit_code: st.exit_code, failed: st.failed } : null)}`,
    restarted: again === undefined ? 'no (no child for m 2 s after the kill)' : `yes (pid ${again})`,
    nextRequest: `${describe(next).slice(0, 40)}… after ${nextMs.toFixed(0)} ms (autoload respawned m)`,
  };
}

type HopPath = 'direct, keep-alive' | 'direct, new connection' | 'router (new connection: it closes each one)';
const HOP_PATHS: readonly HopPath[] = [
  'direct, keep-alive',
  'direct, new connection',
  'router (new connection: it closes each one)',
];

/** (4) sequential 1-token completions to s: direct (reused and new connections) and through the router, interleaved. */
async function proxyOverhead(router: Direct, direct: Direct): Promise<Record<HopPath, number[]>> {
  const out = Object.fromEntries(HOP_PATHS.map((p) => [p, [] as number[]])) as Record<HopPath, number[]>;
  const once = (path: HopPath): Promise<void> =>
    path === 'direct, keep-alive'
      ? mustComplete(direct.base)
      : path === 'direct, new connection'
        ? mustComplete(direct.base, undefined, true)
        : mustComplete(router.base, 's');
  for (let i = 0; i < 20; i++) for (const p of HOP_PATHS) await once(p);
  for (let i = 0; i < requests; i++) {
    // rotate which path goes first
    for (let k = 0; k < HOP_PATHS.length; k++) {
      const path = HOP_PATHS[(i + k) % HOP_PATHS.length] as HopPath;
      const t0 = performance.now();
      await once(path);
      out[path].push(performance.now() - t0);
    }
  }
  return out;
}

/** SIGKILL the router parent: how long until every child is gone. */
async function killParent(router: Direct): Promise<{ children: number; goneMs: number }> {
  const children = [...routerChildren(router.proc.pid).values()];
  const t0 = performance.now();
  router.proc.child.kill('SIGKILL');
  const t = await waitFor('router children exit', () => children.every((p) => !alive(p)), 30_000);
  return { children: children.length, goneMs: t - t0 };
}

// ---------------------------------------------------------------------------------------------
// output

const MB = 1024 * 1024;
function fig(xs: readonly number[] | undefined, scale = 1, digits = 0): string {
  if (xs === undefined || xs.length === 0) return 'n/a';
  const s = summarize(xs.map((x) => x / scale));
  return xs.length === 1
    ? s.p50.toFixed(digits)
    : `${s.p50.toFixed(digits)} [${s.min.toFixed(digits)}–${s.max.toFixed(digits)}]`;
}

function table(title: string, head: string[], rows: string[][]): void {
  const w = head.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]): string => `| ${cells.map((c, i) => c.padEnd(w[i] ?? 0)).join(' | ')} |`;
  process.stdout.write(`\n${title}\n${line(head)}\n|${w.map((n) => '-'.repeat(n + 2)).join('|')}|\n`);
  for (const r of rows) process.stdout.write(`${line(r)}\n`);
}

// ---------------------------------------------------------------------------------------------

const dir = await mkdtemp(join(tmpdir(), 'model-swap-study-'));
const log = join(dir, 'engines.log');
try {
  const bin = findEngine();
  const env = engineEnv(join(dir, 'hf-cache'));
  await mkdir(join(dir, 'hf-cache'));
  const modelsDir = join(dir, 'models');
  await mkdir(modelsDir);
  const gen = (await import(
    pathToFileURL(join(paths.root, 'packages', 'model-provisioner', 'dist', 'index.js')).href
  )) as SyntheticGenerator;
  const files = {} as Record<ModelName, string>;
  const sizes = {} as Record<ModelName, number>;
  for (const { name, query } of MODELS) {
    const t0 = performance.now();
    files[name] = join(modelsDir, `${name}.gguf`);
    sizes[name] = (await gen.writeSyntheticModel(gen.parseSyntheticParams(query), files[name], findVocab())).size_bytes;
    say(
      `generated ${name} (synthetic:llama?${query}): ${(sizes[name] / MB).toFixed(1)} MiB in ${((performance.now() - t0) / 1000).toFixed(1)} s`,
    );
  }
  say(`engine ${bin}; logs ${log}`);

  const run: Run = { bin, files, env, log };
  const router = await startRouter(bin, modelsDir, env, log);
  const parentIdle = memory(router.proc.pid).rss;
  say(`load/unload: ${trials} trials × model × (direct; router /models/load; router autoload)`);
  const { direct, router: viaRouter } = await loadUnload(run, router);

  say('failure isolation: direct');
  const isoDirect = await directIsolation(run);
  say('failure isolation: router');
  const isoRouter = await routerIsolation(router);
  for (const { name } of MODELS) await mustComplete(router.base, name);
  const allLoaded = routerMemory(router.proc.pid);
  const parentLoaded = memory(router.proc.pid).rss;

  say(`proxy hop: ${requests} sequential 1-token completions on s per path, 3 paths`);
  const directS = await spawnDirect(bin, files.s, env, log);
  await waitFor('direct s /health', () => healthy(directS.base));
  const cpu0 = cpuSeconds(router.proc.pid);
  const hop = await proxyOverhead(router, directS);
  const parentCpuUs = ((cpuSeconds(router.proc.pid) - cpu0) * 1e6) / (requests + 20);
  directS.proc.child.kill('SIGTERM');
  await directS.proc.exited;

  say('SIGKILL of the router parent');
  const parentKill = await killParent(router);

  process.stdout.write(
    `model-swap-study: ${bin}\nflags ${ENGINE_FLAGS.join(' ')}; ${trials} trials; figures are median [min–max]\n` +
      `models: ${MODELS.map(({ name, query }) => `${name} = synthetic:llama?${query} (${(sizes[name] / MB).toFixed(1)} MiB)`).join('; ')}\n`,
  );
  table(
    '1. Load: request → first token of a 1-token completion, ms',
    [
      'model',
      'direct spawn→/health 200',
      'direct spawn→first token',
      'router /models/load returns',
      'router load→`loaded`',
      'router load→first token',
      'router autoload→first token',
    ],
    MODELS.map(({ name }) => [
      name,
      fig(direct[`${name}.health`]),
      fig(direct[`${name}.first`]),
      fig(viaRouter[`${name}.loadReturn`], 1, 1),
      fig(viaRouter[`${name}.loaded`]),
      fig(viaRouter[`${name}.first`]),
      fig(viaRouter[`${name}.autoload`]),
    ]),
  );
  table(
    '2. Unload: time to the engine exiting, ms; memory given back, MiB (RSS / anonymous RSS)',
    [
      'model',
      'direct SIGTERM→exit',
      'direct RSS returned',
      'router unload→child exit',
      'router unload→`unloaded`',
      'router RSS returned (parent+children)',
      'router child RSS',
    ],
    MODELS.map(({ name }) => [
      name,
      fig(direct[`${name}.unload`]),
      `${fig(direct[`${name}.rss`], MB, 1)} / ${fig(direct[`${name}.anon`], MB, 1)}`,
      fig(viaRouter[`${name}.unload`]),
      fig(viaRouter[`${name}.unloadStatus`]),
      `${fig(viaRouter[`${name}.rssBack`], MB, 1)} / ${fig(viaRouter[`${name}.anonBack`], MB, 1)}`,
      fig(viaRouter[`${name}.childRss`], MB, 1),
    ]),
  );
  process.stdout.write(
    `router parent RSS: ${(parentIdle / MB).toFixed(1)} MiB idle, ${(parentLoaded / MB).toFixed(1)} MiB with 3 children; ` +
      `parent + 3 children ${(allLoaded.rss / MB).toFixed(1)} MiB (anonymous ${(allLoaded.anon / MB).toFixed(1)} MiB)\n`,
  );
  table(
    "3. Failure isolation: SIGKILL of m's engine 300 ms into a 3000-token request on m",
    ['', 'direct (process per model)', 'router (child of the router)'],
    [
      ['the in-flight request on m', isoDirect.inflight, isoRouter.inflight],
      ['…answered after the kill, ms', isoDirect.inflightMs.toFixed(0), isoRouter.inflightMs.toFixed(0)],
      ['s and l right after', isoDirect.others, isoRouter.others],
      [
        'kill noticed, ms (direct: exit event; router: GET /models leaves `loaded`)',
        isoDirect.detectMs.toFixed(0),
        isoRouter.detectMs.toFixed(0),
      ],
      ['state after', isoDirect.statusAfter, isoRouter.statusAfter],
      ['restarted by itself', isoDirect.restarted, isoRouter.restarted],
      ['next request for m', isoDirect.nextRequest.slice(0, 60), isoRouter.nextRequest],
    ],
  );
  process.stdout.write(
    `SIGKILL of the router parent: its ${parentKill.children} children exited ${parentKill.goneMs.toFixed(0)} ms later (stdin EOF → exit(1)): every model down\n`,
  );
  const base = summarize(hop['direct, keep-alive']);
  const fresh = summarize(hop['direct, new connection']);
  const viaR = summarize(hop['router (new connection: it closes each one)']);
  type Stats = ReturnType<typeof summarize>;
  const cells = (x: Stats): string[] => [x.p50, x.p90, x.p99, x.mean].map((v) => v.toFixed(2));
  const minus = (x: Stats, y: Stats): Stats => ({
    ...x,
    p50: x.p50 - y.p50,
    p90: x.p90 - y.p90,
    p99: x.p99 - y.p99,
    mean: x.mean - y.mean,
  });
  table(
    `4. Proxy hop: ${requests} sequential 1-token completions on s per path, interleaved, ms`,
    ['path', 'p50', 'p90', 'p99', 'mean'],
    [
      ...HOP_PATHS.map((p) => [p, ...cells(summarize(hop[p]))]),
      ['router − direct new connection (the hop)', ...cells(minus(viaR, fresh))],
      ['router − direct keep-alive (what a client pays)', ...cells(minus(viaR, base))],
    ],
  );
  process.stdout.write(
    `router parent CPU: ${parentCpuUs.toFixed(0)} µs per proxied request (its time on CPU over the hop phase / requests)\n`,
  );
} finally {
  await agent.close();
  for (const c of spawned) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  if (keep) say(`kept ${dir}`);
  else await rm(dir, { recursive: true, force: true });
}
