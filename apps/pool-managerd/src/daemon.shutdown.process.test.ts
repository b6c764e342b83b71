import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Pool, request } from 'undici';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { HandoffFileSchema, type PoolStatus } from '@llama-orch/contracts';
import { ensureCpuTestEngine, findFreePort } from '@llama-orch/engine-provisioner';
import { processCmdline } from './support/pid-files.js';
import { buildDist, lineWith, spawnDaemon, type DaemonChild } from './testing/daemon-process.js';
import { FakeOrchestrator } from './testing/fake-orchestrator.js';
import { report, until } from './testing/harness.js';

// Process level: SIGTERM to the built daemon (dist/main.js, real llama-server) must end it within
// its grace period (close-with-grace, 15 s) whatever state it is in — streaming, orchestratord
// gone, stdout reader gone, stdout pipe full, engine still loading — and no engine survives it.
const TOKEN = 'shutdown-process-test-token-0123456789';
const GRACE_MS = 15_000;
const auth = { authorization: `Bearer ${TOKEN}` };

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

let dir: string;
beforeAll(async () => {
  await buildDist();
  await ensureCpuTestEngine();
  dir = mkdtempSync(join(tmpdir(), 'pm-shutdown-'));
}, 45 * 60_000);
afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

interface ConfigOptions {
  addr?: string;
  model?: string;
  ctx?: number;
  slots?: number;
  extra?: string;
}

function writeConfig(name: string, o: ConfigOptions = {}): { path: string; runtime: string } {
  const runtime = join(dir, `${name}-run`);
  const path = join(dir, `${name}.yaml`);
  writeFileSync(
    path,
    `node:
  id: ${name}
  addr: ${o.addr ?? '127.0.0.1:0'}
runtime_dir: ${runtime}
${o.extra ?? ''}pools:
  - id: p0
    model: "${o.model ?? 'synthetic:llama'}"
    ctx: ${o.ctx ?? 512}
    slots: ${o.slots ?? 1}
    threads: 1
`,
  );
  return { path, runtime };
}

function start(configPath: string, stdout: 'read' | 'unread', logLevel?: string): DaemonChild {
  const d = spawnDaemon(configPath, { token: TOKEN, stdout, ...(logLevel !== undefined ? { logLevel } : {}) });
  cleanups.push(() => d.kill());
  return d;
}

async function waitReady(url: string): Promise<void> {
  await until(
    async () => {
      const res = await request(`${url}/v2/pools/p0`, { headers: auth }).catch(() => undefined);
      if (res === undefined) return false;
      return ((await res.body.json()) as PoolStatus).ready;
    },
    'p0 ready',
    120_000,
    20,
  );
}

function enginePid(runtime: string): number {
  return HandoffFileSchema.parse(JSON.parse(readFileSync(join(runtime, 'engines', 'p0-r0.json'), 'utf8'))).pid;
}

/** Sends SIGTERM (plus `alongside`, at the same moment) and waits at most the grace period for the exit. */
async function sigterm(
  d: DaemonChild,
  what: string,
  alongside: () => void = () => undefined,
): Promise<{ code: number | null; signal: string | null }> {
  const t0 = performance.now();
  d.child.kill('SIGTERM');
  alongside();
  const exit = await Promise.race([
    d.exited,
    new Promise<undefined>((r) => setTimeout(() => r(undefined), GRACE_MS + 2000).unref()),
  ]);
  const ms = performance.now() - t0;
  if (exit === undefined) throw new Error(`${what}: still running ${Math.round(ms)} ms after SIGTERM`);
  report(`SIGTERM (${what}) → exit ${exit.code ?? exit.signal} after ${ms.toFixed(0)} ms`);
  expect(ms).toBeLessThan(GRACE_MS);
  return exit;
}

describe('SIGTERM ends pool-managerd within its grace period', () => {
  it('while tasks stream: their streams end with an error event, the engine stops', async () => {
    const cfg = writeConfig('streaming', { model: 'synthetic:llama?ctx=4096', ctx: 4096, slots: 2 });
    const d = start(cfg.path, 'read');
    const url = String((await lineWith(d, 'listening')).url);
    await waitReady(url);
    const pid = enginePid(cfg.runtime);
    const streams = await Promise.all(
      [0, 1].map(async (k) => {
        const res = await request(`${url}/v2/pools/p0/completions`, {
          method: 'POST',
          headers: { ...auth, 'content-type': 'application/json' },
          reset: true,
          body: JSON.stringify({
            task_id: randomUUID(),
            prompt: `a long story ${k}`,
            max_tokens: 100_000,
            greedy: true,
          }),
        });
        expect(res.statusCode).toBe(200);
        const body = res.body[Symbol.asyncIterator]();
        let text = '';
        // Streaming: at least one token arrived.
        while (!text.includes('"type":"token"')) text += String((await body.next()).value ?? '');
        return { body, text };
      }),
    );
    const exit = await sigterm(d, 'tasks streaming');
    expect(exit).toEqual({ code: 0, signal: null });
    for (const s of streams) {
      for (;;) {
        const next = await s.body.next().catch(() => ({ done: true, value: undefined }));
        if (next.done === true) break;
        s.text += String(next.value);
      }
      const last = JSON.parse(s.text.trim().split('\n').at(-1) ?? '{}') as { type?: string; retriable?: boolean };
      expect(last).toMatchObject({ type: 'error', retriable: true });
    }
    expect(processCmdline(pid)).toBeUndefined();
  });

  it('when orchestratord goes away at the same moment', async () => {
    const orch = new FakeOrchestrator(TOKEN);
    await orch.listen();
    cleanups.push(() => orch.close());
    const cfg = writeConfig('orchgone', { extra: `orchestrator:\n  url: ${orch.url}\n  heartbeat_interval_ms: 200\n` });
    const d = start(cfg.path, 'read');
    await lineWith(d, 'listening');
    await until(() => orch.heartbeats.some((x) => x.body.pools[0]?.ready === true), 'ready heartbeat', 120_000);
    const pid = enginePid(cfg.runtime);
    const exit = await sigterm(d, 'orchestratord gone', () => void orch.close());
    expect(exit).toEqual({ code: 0, signal: null });
    expect(processCmdline(pid)).toBeUndefined();
  });

  it('when the stdout reader exits right after the signal (EPIPE on every later line)', async () => {
    const cfg = writeConfig('readergone');
    const d = start(cfg.path, 'read');
    await waitReady(String((await lineWith(d, 'listening')).url));
    const pid = enginePid(cfg.runtime);
    // A dying terminal or supervisor: the signal, then the read end of the pipe is gone.
    const exit = await sigterm(d, 'stdout reader gone', () => d.child.stdout?.destroy());
    expect(exit).toEqual({ code: 0, signal: null });
    expect(processCmdline(pid)).toBeUndefined();
  });

  it('when nobody reads stdout and the pipe is full', async () => {
    const port = await findFreePort();
    const cfg = writeConfig('pipefull', { addr: `127.0.0.1:${port}` });
    // Debug level: one `request done` line per request. stdout is piped and never read.
    const d = start(cfg.path, 'unread', 'debug');
    const url = `http://127.0.0.1:${port}`;
    await waitReady(url);
    const pid = enginePid(cfg.runtime);
    // ≈ 0.5 MB of log lines, far past the pipe's 64 KiB and what the reader side buffers: the
    // daemon keeps answering while its stdout is full.
    const client = new Pool(url, { connections: 8 });
    try {
      let ok = 0;
      for (let batch = 0; batch < 50; batch++) {
        const codes = await Promise.all(
          Array.from({ length: 50 }, async () => {
            const res = await client.request({ path: '/health', method: 'GET', headers: auth });
            await res.body.dump();
            return res.statusCode;
          }),
        );
        ok += codes.filter((c) => c === 200).length;
      }
      expect(ok).toBe(2500);
    } finally {
      await client.close();
    }
    const exit = await sigterm(d, 'stdout pipe full');
    expect(exit).toEqual({ code: 0, signal: null });
    expect(processCmdline(pid)).toBeUndefined();
  });

  it('while the engine is still loading', async () => {
    const cfg = writeConfig('loading', { model: 'synthetic:llama?ctx=4096', ctx: 4096 });
    const d = start(cfg.path, 'read');
    // The PID file appears right after the spawn, long before the model is loaded.
    const pidFile = join(cfg.runtime, 'pids', 'p0-r0.pid');
    const pid = await until(
      () => {
        try {
          return (JSON.parse(readFileSync(pidFile, 'utf8')) as { pid: number }).pid;
        } catch {
          return undefined;
        }
      },
      'engine spawned',
      120_000,
      1,
    );
    // The engine is still loading when the SIGTERM goes: its /health does not answer 200 yet
    // (connection refused before it binds, 503 while the model loads).
    const argv = processCmdline(pid) ?? [];
    const enginePort = argv[argv.indexOf('--port') + 1];
    expect(enginePort, argv.join(' ')).toMatch(/^\d+$/);
    const health = await request(`http://127.0.0.1:${enginePort}/health`).then(
      async (r) => {
        await r.body.dump();
        return r.statusCode;
      },
      (err: unknown) => (err as NodeJS.ErrnoException).code ?? String(err),
    );
    expect(health, 'engine /health just before the SIGTERM').not.toBe(200);
    const exit = await sigterm(d, 'engine loading');
    expect(exit).toEqual({ code: 0, signal: null });
    expect(processCmdline(pid)).toBeUndefined();
    expect(d.lines.some((l) => l.msg === 'pool ready')).toBe(false);
    report(
      `engine loading at SIGTERM: /health answered ${health}; 'engine healthy' ${d.lines.some((l) => l.msg === 'engine healthy') ? 'was' : 'was not'} logged`,
    );
  });
});
