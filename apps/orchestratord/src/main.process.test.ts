// Process level: the built daemon (dist/main.js) as a real child process. SIGTERM must end it
// within its grace period whatever state it is in, its stdout included.
import { execFileSync, spawn, type ChildProcessByStdio } from 'node:child_process';
import { dirname, join } from 'node:path';
import type { Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { request } from 'undici';
import { beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { FixturePoolManager } from '@llama-orch/fixture-pool-manager';
import { openSse, taskBody, TOKEN } from './testing/test-helpers.js';

const APP_DIR = dirname(dirname(fileURLToPath(import.meta.url)));
const MAIN = join(APP_DIR, 'dist', 'main.js');
/** What these tests allow a stop (main.ts's grace is the drain grace + ~11 s; these runs drain ≤ 1 s or have nothing to drain). */
const GRACE_MS = 10_000;
const HB_MS = 200;

type Child = ChildProcessByStdio<null, Readable, null>;

interface Daemon {
  readonly child: Child;
  readonly url: string;
  /** stdout so far, while it is read. */
  readonly out: { text: string };
  /** Resolves when the process exited: how, and how long after `since`. */
  exit(since: number): Promise<{ code: number | null; signal: NodeJS.Signals | null; ms: number }>;
}

beforeAll(() => {
  // The child runs the built module (incremental; the README's test command builds first anyway).
  execFileSync('npx', ['tsc', '--build', APP_DIR], { cwd: APP_DIR, stdio: 'inherit' });
}, 120_000);

function spawnDaemon(env: Record<string, string>): Child {
  const child = spawn(process.execPath, [MAIN], {
    env: {
      PATH: process.env.PATH ?? '',
      ORCHD_ADDR: '127.0.0.1:0',
      LLORCH_API_TOKEN: TOKEN,
      ORCHD_NODE_HEARTBEAT_MS: String(HB_MS),
      ...env,
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  onTestFinished(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  return child;
}

/** Starts the daemon and reads stdout until its `listening` line. */
async function startDaemon(env: Record<string, string> = {}): Promise<Daemon> {
  const child = spawnDaemon(env);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.once('exit', (code, signal) => resolve({ code, signal }));
  });
  const out = { text: '' };
  const url = await new Promise<string>((resolve, reject) => {
    const onData = (chunk: Buffer): void => {
      out.text += chunk.toString('utf8');
      const line = out.text.split('\n').find((l) => l.includes('"msg":"listening"'));
      if (line !== undefined) resolve((JSON.parse(line) as { url: string }).url);
    };
    child.stdout.on('data', onData);
    child.once('exit', () => reject(new Error(`orchestratord exited before listening: ${out.text}`)));
  });
  return {
    child,
    url,
    out,
    exit: async (since) => {
      const r = await exited;
      return { ...r, ms: Date.now() - since };
    },
  };
}

/** Sends SIGTERM; fails the test with SIGKILL once the grace period is over. */
function terminate(d: Daemon): number {
  const at = Date.now();
  d.child.kill('SIGTERM');
  const killer = setTimeout(() => d.child.kill('SIGKILL'), GRACE_MS + 2000);
  onTestFinished(() => clearTimeout(killer));
  return at;
}

function records(text: string): Array<Record<string, unknown>> {
  return text
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

describe('orchestratord process: SIGTERM always ends it within the grace period', () => {
  it('with tasks that stream past the drain grace: each stream gets its terminal error frame, the node sees the aborts, exit 0', async () => {
    const d = await startDaemon({ ORCHD_DRAIN_GRACE_MS: '1000' });
    const node = await FixturePoolManager.start({
      nodeId: 'n1',
      pools: [{ pool_id: 'p', models: ['m'], slots: 2 }],
      token: TOKEN,
      tokenIntervalMs: 20,
    });
    onTestFinished(() => node.close());
    await node.startHeartbeats(d.url, HB_MS);
    const streams = await Promise.all(
      [1, 2].map(async () => {
        const res = await request(`${d.url}/v2/tasks`, {
          method: 'POST',
          headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
          body: JSON.stringify(taskBody({ max_tokens: 2000 })),
        });
        expect(res.statusCode).toBe(202);
        const json = (await res.body.json()) as { task_id: string; streams: { sse: string } };
        return { id: json.task_id, sse: await openSse(json.streams.sse, { authorization: `Bearer ${TOKEN}` }) };
      }),
    );
    await Promise.all(streams.map((s) => s.sse.waitForFrame((f) => f.event === 'token')));
    const exit = await d.exit(terminate(d));
    expect(exit).toMatchObject({ code: 0, signal: null });
    expect(exit.ms).toBeLessThan(GRACE_MS);
    for (const s of streams) {
      await s.sse.done;
      expect(s.sse.frames.at(-1)).toMatchObject({ event: 'error', data: { code: 'INTERNAL', retriable: true } });
      expect(node.aborts).toContain(s.id);
    }
    expect(records(d.out.text).map((r) => r.msg)).toEqual(expect.arrayContaining(['shutting down', 'stopped']));
  });

  it('drains: not ready at once, a task admitted within the drain delay is served, one after it refused (retriable), every stream ends with `end`, then exit 0', async () => {
    const d = await startDaemon({ ORCHD_DRAIN_GRACE_MS: '8000', ORCHD_DRAIN_DELAY_MS: '1000' });
    const node = await FixturePoolManager.start({
      nodeId: 'n1',
      pools: [{ pool_id: 'p', models: ['m'], slots: 2 }],
      token: TOKEN,
      tokenIntervalMs: 20,
    });
    onTestFinished(() => node.close());
    await node.startHeartbeats(d.url, HB_MS);
    const post = (): ReturnType<typeof request> =>
      request(`${d.url}/v2/tasks`, {
        method: 'POST',
        headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify(taskBody({ max_tokens: 100 })),
      });
    const submit = async (): Promise<{ id: string; sse: Awaited<ReturnType<typeof openSse>> }> => {
      const res = await post();
      expect(res.statusCode).toBe(202);
      const json = (await res.body.json()) as { task_id: string; streams: { sse: string } };
      return { id: json.task_id, sse: await openSse(json.streams.sse, { authorization: `Bearer ${TOKEN}` }) };
    };
    const first = await submit();
    await first.sse.waitForFrame((f) => f.event === 'token');
    const at = terminate(d);
    // not ready from the signal on, while it still serves
    await expect
      .poll(async () => (await request(`${d.url}/readyz`)).statusCode, { timeout: 2000, interval: 20 })
      .toBe(503);
    const late = await submit();
    expect(Date.now() - at).toBeLessThan(1000);
    // past the delay: admission is closed (new work must not stretch the drain), the tasks run on
    await sleep(1200 - (Date.now() - at));
    const refused = await post();
    expect(refused.statusCode).toBeGreaterThanOrEqual(500);
    expect(await refused.body.json()).toMatchObject({ code: 'INTERNAL', retriable: true });
    const exit = await d.exit(at);
    expect(exit).toMatchObject({ code: 0, signal: null });
    for (const s of [first, late]) {
      await s.sse.done;
      expect(s.sse.frames.at(-1)).toMatchObject({ event: 'end' });
      expect(s.sse.frames.filter((f) => f.event === 'token').length).toBeGreaterThan(0);
    }
    const msgs = records(d.out.text).map((r) => r.msg);
    expect(msgs).toEqual(expect.arrayContaining(['draining', 'drained', 'stopped']));
  });

  it('when the stdout reader goes away right after the signal (EPIPE on every later line): exit 0', async () => {
    const d = await startDaemon();
    const at = terminate(d);
    d.child.stdout.destroy();
    const exit = await d.exit(at);
    expect(exit).toMatchObject({ code: 0, signal: null });
    expect(exit.ms).toBeLessThan(GRACE_MS);
  });

  it('when nobody reads stdout and the pipe is full: exit 0', async () => {
    const d = await startDaemon({ LOG_LEVEL: 'debug' });
    // Stop reading: the parent buffers a little, then the pipe (64 KB) fills.
    d.child.stdout.removeAllListeners('data');
    d.child.stdout.pause();
    // Each request logs its URL at debug: ~2 MB of lines, far past the pipe and the parent's buffer.
    const pad = 'x'.repeat(8000);
    for (let i = 0; i < 250; i += 1) {
      const res = await request(`${d.url}/metrics?pad=${pad}&i=${i}`);
      await res.body.dump();
    }
    const exit = await d.exit(terminate(d));
    expect(exit).toMatchObject({ code: 0, signal: null });
    expect(exit.ms).toBeLessThan(GRACE_MS);
  });

  it('with a configuration error: the fatal line reaches stdout before exit 1', async () => {
    const child = spawnDaemon({ ORCHD_ADDR: '0.0.0.0:8080', LLORCH_API_TOKEN: '' });
    let text = '';
    child.stdout.on('data', (c: Buffer) => {
      text += c.toString('utf8');
    });
    const code = await new Promise<number | null>((resolve) => child.once('close', (c) => resolve(c)));
    expect(code).toBe(1);
    expect(records(text)).toEqual([
      expect.objectContaining({ level: 60, msg: expect.stringMatching(/invalid orchestratord configuration/) }),
    ]);
  });
});
