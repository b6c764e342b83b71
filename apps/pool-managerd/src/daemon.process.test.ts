import { randomUUID } from 'node:crypto';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import { Agent, H2CClient, request } from 'undici';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { HandoffFileSchema, type PoolStatus } from '@llama-orch/contracts';
import { ensureCpuTestEngine, testCacheDir } from '@llama-orch/engine-provisioner';
import { isLlamaServerProcess, processCmdline } from './support/pid-files.js';
import { startExternalEngine, type ExternalEngine } from './testing/external-engine.js';
import { buildDist } from './testing/daemon-process.js';
import { FakeOrchestrator } from './testing/fake-orchestrator.js';
import { report, until } from './testing/harness.js';

// Process level: the built daemon (dist/main.js) as a real child process.
const APP_DIR = dirname(dirname(fileURLToPath(import.meta.url)));
const MAIN = join(APP_DIR, 'dist', 'main.js');
const TOKEN = 'daemon-process-test-token-0123456789';

interface Daemon {
  child: ChildProcess;
  url: string;
  lines: Array<Record<string, unknown>>;
  exited: Promise<{ code: number | null; signal: string | null }>;
}

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

beforeAll(async () => {
  // Build what the daemon runs (incremental; the README's test command does it too).
  await buildDist();
  await ensureCpuTestEngine();
}, 45 * 60_000);

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'pm-daemon-'));
});
afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

function writeConfig(name: string, extra = ''): { path: string; runtime: string } {
  const runtime = join(dir, `${name}-run`);
  const path = join(dir, `${name}.yaml`);
  writeFileSync(
    path,
    `node:
  id: ${name}
  addr: 127.0.0.1:0
runtime_dir: ${runtime}
${extra}pools:
  - id: p0
    model: synthetic:llama
    ctx: 512
    threads: 1
`,
  );
  return { path, runtime };
}

async function startDaemon(configPath: string): Promise<Daemon> {
  const child = spawn(process.execPath, [MAIN, '--config', configPath], {
    env: { ...process.env, LLORCH_CACHE_DIR: testCacheDir(), LLORCH_API_TOKEN: TOKEN, LOG_LEVEL: 'info' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const exited = new Promise<{ code: number | null; signal: string | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  cleanups.push(async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await exited;
  });
  const lines: Array<Record<string, unknown>> = [];
  const rl = createInterface({ input: child.stdout! });
  let resolveUrl!: (u: string) => void;
  const urlP = new Promise<string>((r) => {
    resolveUrl = r;
  });
  rl.on('line', (line) => {
    try {
      const rec = JSON.parse(line) as Record<string, unknown>;
      lines.push(rec);
      if (rec.msg === 'listening' && typeof rec.url === 'string') resolveUrl(rec.url);
    } catch {
      lines.push({ raw: line });
    }
  });
  const url = await Promise.race([
    urlP,
    exited.then((e) => {
      throw new Error(`daemon exited before listening: ${JSON.stringify(e)} ${JSON.stringify(lines.slice(-5))}`);
    }),
  ]);
  return { child, url, lines, exited };
}

async function pool(d: Daemon, id: string): Promise<PoolStatus> {
  const res = await request(`${d.url}/v2/pools/${id}`, { headers: { authorization: `Bearer ${TOKEN}` } });
  return (await res.body.json()) as PoolStatus;
}

describe('pool-managerd as a process', () => {
  it('SIGKILL of pool-managerd leaves no llama-server behind', async () => {
    const cfg = writeConfig('killme');
    const d = await startDaemon(cfg.path);
    await until(async () => (await pool(d, 'p0')).ready, 'p0 ready', 120_000, 50);
    const hf = HandoffFileSchema.parse(JSON.parse(readFileSync(join(cfg.runtime, 'engines', 'p0-r0.json'), 'utf8')));
    expect(isLlamaServerProcess(hf.pid)).toBe(true);
    const pidFile = JSON.parse(readFileSync(join(cfg.runtime, 'pids', 'p0-r0.pid'), 'utf8')) as { pid: number };
    expect(pidFile.pid).toBe(hf.pid);
    const t0 = performance.now();
    d.child.kill('SIGKILL');
    await d.exited;
    await until(() => processCmdline(hf.pid) === undefined, 'engine gone after daemon SIGKILL', 5000, 5);
    report(`pool-managerd SIGKILL → engine pid ${hf.pid} gone after ${(performance.now() - t0).toFixed(0)} ms`);
  });

  it('at start-up an orphan llama-server named by a stale PID file is killed', async () => {
    const cfg = writeConfig('sweeper');
    const orphan: ExternalEngine = await startExternalEngine();
    cleanups.push(() => orphan.stop());
    const { mkdirSync } = await import('node:fs');
    mkdirSync(join(cfg.runtime, 'pids'), { recursive: true });
    writeFileSync(
      join(cfg.runtime, 'pids', 'p0-r0.pid'),
      JSON.stringify({
        pid: orphan.pid,
        pool_id: 'p0',
        replica_id: 'r0',
        binary_path: 'x',
        started_at: new Date().toISOString(),
      }),
    );
    const d = await startDaemon(cfg.path);
    await until(() => orphan.child.exitCode !== null || orphan.child.signalCode !== null, 'orphan killed', 10_000);
    expect(orphan.child.signalCode).toBe('SIGKILL');
    // log lines reach stdout up to 100 ms after they are logged (the sink buffers them)
    await until(
      () => d.lines.some((l) => l.msg === 'killed orphan llama-server from a previous run' && l.pid === orphan.pid),
      "'killed orphan' line",
      5000,
    );
    await until(async () => (await pool(d, 'p0')).ready, 'p0 ready', 120_000, 50);
    d.child.kill('SIGTERM');
    expect((await d.exited).code).toBe(0);
  });

  // The orchestrator here is FakeOrchestrator: it records the node API calls (zod-parsed) and answers
  // them; the real orchestratord side is covered by the e2e suites.
  it('registers with an orchestrator (fake, recording the node API), heartbeats ready only once the engine is healthy, deregisters and stops engines on SIGTERM', async () => {
    const orch = new FakeOrchestrator(TOKEN);
    await orch.listen();
    cleanups.push(() => orch.close());
    const cfg = writeConfig('withorch', `orchestrator:\n  url: ${orch.url}\n  heartbeat_interval_ms: 200\n`);
    const d = await startDaemon(cfg.path);
    await until(() => orch.registrations.length > 0, 'registered', 30_000);
    expect(orch.registrations[0]).toMatchObject({ node_id: 'withorch', address: d.url });
    expect(orch.registrations[0]?.capabilities.cpu_cores).toBeGreaterThan(0);
    await until(async () => (await pool(d, 'p0')).ready, 'p0 ready', 120_000, 50);
    const hb = await until(
      () => orch.heartbeats.find((x) => x.body.pools[0]?.ready === true),
      'ready heartbeat',
      10_000,
    );
    // ctx is per slot: -c 512 capped by the synthetic model's training context (256).
    expect(hb.body.pools[0]).toMatchObject({ pool_id: 'p0', state: 'ready', slots_total: 1, slots_free: 1, ctx: 256 });
    expect(hb.body.pools[0]?.engine_version).toMatch(/^b\d+-/);
    // Ready is reported only after the engine answered /health 200 (logged as 'engine healthy').
    const healthy = await until(() => d.lines.find((l) => l.msg === 'engine healthy'), "'engine healthy' line", 5000);
    const healthyAt = healthy.time as number;
    const firstReady = orch.heartbeats.find((x) => x.body.pools[0]?.ready === true);
    expect(firstReady?.at).toBeGreaterThanOrEqual(healthyAt);
    expect(orch.heartbeats.filter((x) => x.at < healthyAt).every((x) => x.body.pools[0]?.ready === false)).toBe(true);
    // The registration carries whatever is true when it is sent (the engine may or may not be healthy
    // by then): ready only after 'engine healthy'; not ready → a consistent not-ready snapshot, and
    // the ready heartbeat came after it. Both cases check something.
    const regPool = orch.registrations[0]?.pools[0];
    expect(regPool?.pool_id).toBe('p0');
    report(`registration sent with p0 ${regPool?.ready === true ? 'ready' : `not ready (state ${regPool?.state})`}`);
    if (regPool?.ready === true) {
      expect(orch.registrationTimes[0], "a ready registration arrived after 'engine healthy'").toBeGreaterThanOrEqual(
        healthyAt,
      );
      expect(regPool.state).toBe('ready');
    } else {
      expect(regPool?.state).not.toBe('ready');
      expect(firstReady?.at).toBeGreaterThanOrEqual(orch.registrationTimes[0]!);
    }
    // The h2c dispatch listener: registered, and it streams a real completion over HTTP/2.
    const h2cUrl = orch.registrations[0]?.dispatch_h2c;
    expect(h2cUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(h2cUrl).not.toBe(d.url);
    const h2 = new Agent({ factory: (origin, opts) => new H2CClient(origin, opts) });
    try {
      const res = await h2.request({
        origin: h2cUrl as string,
        path: '/v2/pools/p0/completions',
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${TOKEN}` },
        body: JSON.stringify({ task_id: randomUUID(), prompt: 'Hello', max_tokens: 4, greedy: true }),
      });
      expect(res.statusCode).toBe(200);
      const events = (await res.body.text())
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as { type: string });
      expect(events.at(-1)).toMatchObject({ type: 'end', pool_id: 'p0', node_id: 'withorch' });
      expect(events.filter((e) => e.type === 'token').length).toBeGreaterThan(0);
    } finally {
      await h2.close();
    }
    const hf = HandoffFileSchema.parse(JSON.parse(readFileSync(join(cfg.runtime, 'engines', 'p0-r0.json'), 'utf8')));
    d.child.kill('SIGTERM');
    expect((await d.exited).code).toBe(0);
    expect(orch.deregistrations).toEqual(['withorch']);
    expect(processCmdline(hf.pid)).toBeUndefined();
    expect(existsSync(join(cfg.runtime, 'engines', 'p0-r0.json'))).toBe(false);
    expect(existsSync(join(cfg.runtime, 'pool-managerd.pid'))).toBe(false);
  });

  it('an invalid config fails fast with every issue in one error', async () => {
    const path = join(dir, 'bad.yaml');
    writeFileSync(path, 'node:\n  id: Bad Id\n  bogus: 1\npools: []\n');
    const r = await execa(process.execPath, [MAIN, '--config', path], {
      reject: false,
      env: { ...process.env, LLORCH_CACHE_DIR: testCacheDir() },
      timeout: 30_000,
    });
    expect(r.exitCode).toBe(1);
    const fatal = String(r.stdout)
      .split('\n')
      .filter((l) => l !== '')
      .map((l) => JSON.parse(l) as { msg: string; err?: { message: string } })
      .find((l) => l.msg === 'pool-managerd failed to start');
    expect(fatal?.err?.message).toMatch(/node\.id/);
    expect(fatal?.err?.message).toMatch(/bogus|Unrecognized/);
    expect(fatal?.err?.message).toMatch(/pools/);
  });
});
